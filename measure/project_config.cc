// verity.toml through toml++: each table's keys are read by name, checked,
// and any other key is refused; templates are checked for unknown variables
// when the file is read, not when a command first runs.
#include "measure/project_config.h"

#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <toml++/toml.h>

namespace verity::measure {
namespace {

// Errors name the file, the line and the key's dotted path.
std::string Join(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Err(const toml::node* n, const std::string& path, const std::string& what) const {
    const std::string line = n ? ":" + std::to_string(n->source().begin.line) : "";
    return Status::Error(source_ + line + ": " + path + ": " + what);
  }

  // Refuses any key of `t` outside `known`.
  Status OnlyKeys(const toml::table& t, const std::string& path, const std::set<std::string>& known) const {
    for (auto&& [k, v] : t)
      if (!known.count(std::string(k.str()))) {
        std::string list;
        for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
        return Err(&v, path.empty() ? std::string(k.str()) : path + "." + std::string(k.str()),
                   "unknown key (known here: " + list + ")");
      }
    return OkStatus();
  }

  Result<std::string> String(const toml::table& t, const std::string& path, const char* key, bool required) const {
    const toml::node* n = t.get(key);
    const std::string where = Join(path, key);
    if (n == nullptr) {
      if (required) return Err(nullptr, where, "required, missing");
      return std::string();
    }
    auto v = n->value<std::string>();
    if (!n->is_string() || !v) return Err(n, where, std::string("expected a string, got ") + TypeName(*n));
    if (v->empty()) return Err(n, where, "must not be empty");
    return *v;
  }

  Result<long long> Integer(const toml::table& t, const std::string& path, const char* key, long long lo,
                            long long hi) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return 0LL;
    const std::string where = Join(path, key);
    if (!n->is_integer()) return Err(n, where, std::string("expected an integer, got ") + TypeName(*n));
    const long long v = n->value<int64_t>().value_or(0);
    if (v < lo || v > hi)
      return Err(n, where,
                 "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
                     std::to_string(v));
    return v;
  }

  Result<double> Number(const toml::table& t, const std::string& path, const char* key, double lo, double hi) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return 0.0;
    const std::string where = Join(path, key);
    if (!n->is_number()) return Err(n, where, std::string("expected a number, got ") + TypeName(*n));
    const double v =
        n->is_integer() ? static_cast<double>(n->value<int64_t>().value_or(0)) : n->value<double>().value_or(0);
    if (!(v >= lo && v <= hi))
      return Err(n, where, "expected a number from " + Str(lo) + " to " + Str(hi) + ", got " + Str(v));
    return v;
  }

  Result<std::vector<std::string>> Strings(const toml::table& t, const std::string& path, const char* key,
                                           bool required) const {
    const toml::node* n = t.get(key);
    const std::string where = Join(path, key);
    if (n == nullptr) {
      if (required) return Err(nullptr, where, "required, missing");
      return std::vector<std::string>();
    }
    const toml::array* a = n->as_array();
    if (a == nullptr) return Err(n, where, std::string("expected an array of strings, got ") + TypeName(*n));
    std::vector<std::string> out;
    for (size_t i = 0; i < a->size(); i++) {
      const toml::node& e = *a->get(i);
      auto v = e.value<std::string>();
      if (!e.is_string() || !v || v->empty())
        return Err(&e, where + "[" + std::to_string(i) + "]", "expected a non-empty string");
      out.push_back(*v);
    }
    if (required && out.empty()) return Err(n, where, "must hold at least one entry");
    return out;
  }

  Result<const toml::table*> Table(const toml::table& t, const std::string& path, const char* key,
                                   bool required) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (required) return Err(nullptr, path.empty() ? key : path + "." + key, "required table, missing");
      return static_cast<const toml::table*>(nullptr);
    }
    if (!n->is_table())
      return Err(n, path.empty() ? key : path + "." + key, std::string("expected a table, got ") + TypeName(*n));
    return n->as_table();
  }

 private:
  static const char* TypeName(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a float";
      case toml::node_type::boolean: return "a boolean";
      case toml::node_type::array: return "an array";
      case toml::node_type::table: return "a table";
      default: return "a date or time";
    }
  }
  static std::string Str(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }
  std::string source_;
};

// A template's variables must be known ones (checked by expanding it with
// placeholders): a typo is found when the file is read.
// `extra`: the variables only this template may use ({against}, {tokens}, {logits_out}).
Status CheckTemplate(const Reader& r, const toml::table& t, const std::string& path, const char* key,
                     const std::string& tmpl, const std::set<std::string>& extra = {}) {
  static const std::set<std::string> kOnlySome = {"against", "tokens", "logits_out"};
  std::map<std::string, std::string> vars;
  for (const std::string& v : TemplateVariables())
    if (!kOnlySome.count(v) || extra.count(v)) vars[v] = "x";
  auto e = ExpandTemplate(tmpl, vars, path + "." + key);
  if (!e.ok()) return r.Err(t.get(key), path + "." + key, e.status().message());
  return OkStatus();
}

Status ReadBuild(const Reader& r, const toml::table& root, ProjectConfig* c) {
  VERITY_ASSIGN_OR_RETURN(const toml::table* b, r.Table(root, "", "build", true));
  VERITY_RETURN_IF_ERROR(r.OnlyKeys(*b, "build", {"commands", "timeout_s", "artifact"}));
  VERITY_ASSIGN_OR_RETURN(c->build_commands, r.Strings(*b, "build", "commands", true));
  VERITY_ASSIGN_OR_RETURN(long long timeout, r.Integer(*b, "build", "timeout_s", 1, 86400));
  c->build_timeout_s = static_cast<int>(timeout);
  VERITY_ASSIGN_OR_RETURN(c->artifact, r.String(*b, "build", "artifact", true));
  if (c->artifact[0] == '/' || c->artifact.find("..") != std::string::npos)
    return r.Err(b->get("artifact"), "build.artifact",
                 "must be a path inside the worktree (relative, no '..'), got '" + c->artifact + "'");
  return OkStatus();
}

Status ReadWorkloads(const Reader& r, const toml::table& root, ProjectConfig* c) {
  VERITY_ASSIGN_OR_RETURN(const toml::table* ws, r.Table(root, "", "workload", true));
  for (auto&& [k, v] : *ws) {
    const std::string name(k.str()), path = "workload." + name;
    if (!v.is_table()) return r.Err(&v, path, "expected a table ([workload." + name + "])");
    const toml::table& t = *v.as_table();
    VERITY_RETURN_IF_ERROR(
        r.OnlyKeys(t, path, {"bench", "metric", "guards", "model", "dtype", "steps", "threads", "min_seconds"}));
    WorkloadConfig w;
    w.name = name;
    VERITY_ASSIGN_OR_RETURN(w.bench, r.String(t, path, "bench", true));
    VERITY_RETURN_IF_ERROR(CheckTemplate(r, t, path, "bench", w.bench));
    VERITY_ASSIGN_OR_RETURN(w.metric, r.String(t, path, "metric", true));
    VERITY_ASSIGN_OR_RETURN(w.guards, r.Strings(t, path, "guards", false));
    for (const std::string& g : w.guards)
      if (g == w.metric)
        return r.Err(t.get("guards"), path + ".guards", "'" + g + "' is the workload's metric, not a guard");
    VERITY_ASSIGN_OR_RETURN(w.model, r.String(t, path, "model", false));
    VERITY_ASSIGN_OR_RETURN(w.dtype, r.String(t, path, "dtype", false));
    VERITY_ASSIGN_OR_RETURN(long long steps, r.Integer(t, path, "steps", 1, 1000000));
    VERITY_ASSIGN_OR_RETURN(long long threads, r.Integer(t, path, "threads", 1, 4096));
    VERITY_ASSIGN_OR_RETURN(w.min_seconds, r.Number(t, path, "min_seconds", 0.01, 600.0));
    w.steps = static_cast<int>(steps);
    w.threads = static_cast<int>(threads);
    c->workloads.push_back(std::move(w));
  }
  if (c->workloads.empty()) return r.Err(ws, "workload", "define at least one workload ([workload.NAME])");
  return OkStatus();
}

// kind "verity": a verity binary's own parity command.
Status ReadVerityParity(const Reader& r, const toml::table& p, ParityConfig* pc) {
  VERITY_RETURN_IF_ERROR(r.OnlyKeys(p, "parity", {"kind", "command", "against_command"}));
  VERITY_RETURN_IF_ERROR(CheckTemplate(r, p, "parity", "command", pc->command));
  VERITY_ASSIGN_OR_RETURN(pc->against_command, r.String(p, "parity", "against_command", false));
  if (pc->against_command.empty()) return OkStatus();
  VERITY_RETURN_IF_ERROR(CheckTemplate(r, p, "parity", "against_command", pc->against_command, {"against"}));
  if (pc->against_command.find("{against}") == std::string::npos)
    return r.Err(p.get("against_command"), "parity.against_command", "must use {against}");
  return OkStatus();
}

// kind "tokens": the command prints the greedy output; golden pins it.
Status ReadTokensParity(const Reader& r, const toml::table& p, ParityConfig* pc) {
  VERITY_RETURN_IF_ERROR(r.OnlyKeys(p, "parity", {"kind", "command", "golden"}));
  VERITY_RETURN_IF_ERROR(CheckTemplate(r, p, "parity", "command", pc->command));
  VERITY_ASSIGN_OR_RETURN(pc->golden, r.String(p, "parity", "golden", false));
  return OkStatus();
}

// kind "logits": the command writes {logits_out} for the ids in `tokens`.
Status ReadLogitsParity(const Reader& r, const toml::table& p, ParityConfig* pc) {
  VERITY_RETURN_IF_ERROR(r.OnlyKeys(p, "parity", {"kind", "command", "tokens", "vocab_size", "reference"}));
  VERITY_RETURN_IF_ERROR(CheckTemplate(r, p, "parity", "command", pc->command, {"tokens", "logits_out"}));
  if (pc->command.find("{logits_out}") == std::string::npos)
    return r.Err(p.get("command"), "parity.command", "must use {logits_out}, the file the engine writes its logits to");
  VERITY_ASSIGN_OR_RETURN(pc->tokens, r.String(p, "parity", "tokens", true));
  VERITY_ASSIGN_OR_RETURN(long long vocab, r.Integer(p, "parity", "vocab_size", 1, 10000000));
  if (vocab == 0) return r.Err(nullptr, "parity.vocab_size", "required, missing");
  pc->vocab_size = static_cast<int>(vocab);
  VERITY_ASSIGN_OR_RETURN(pc->reference, r.String(p, "parity", "reference", false));
  return OkStatus();
}

Status ReadParity(const Reader& r, const toml::table& root, ProjectConfig* c) {
  VERITY_ASSIGN_OR_RETURN(const toml::table* p, r.Table(root, "", "parity", false));
  if (p == nullptr) return OkStatus();
  ParityConfig pc;
  VERITY_ASSIGN_OR_RETURN(pc.kind, r.String(*p, "parity", "kind", true));
  if (pc.kind != "verity" && pc.kind != "tokens" && pc.kind != "logits")
    return r.Err(p->get("kind"), "parity.kind",
                 "'" + pc.kind +
                     "' is not a parity evidence kind verity reads (known: "
                     "verity, a verity.parity/1 record; tokens, an engine's greedy output "
                     "byte for byte; logits, an engine's raw f32 logits file)");
  VERITY_ASSIGN_OR_RETURN(pc.command, r.String(*p, "parity", "command", true));
  if (pc.kind == "verity") VERITY_RETURN_IF_ERROR(ReadVerityParity(r, *p, &pc));
  if (pc.kind == "tokens") VERITY_RETURN_IF_ERROR(ReadTokensParity(r, *p, &pc));
  if (pc.kind == "logits") VERITY_RETURN_IF_ERROR(ReadLogitsParity(r, *p, &pc));
  c->parity = pc;
  return OkStatus();
}

}  // namespace

const std::vector<std::string>& TemplateVariables() {
  static const std::vector<std::string> v = {"artifact",   "worktree", "model",       "dtype",
                                             "steps",      "threads",  "min_seconds", "verity",
                                             "config_dir", "against",  "tokens",      "logits_out"};
  return v;
}

Result<std::string> ExpandTemplate(const std::string& tmpl, const std::map<std::string, std::string>& vars,
                                   const std::string& what) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); i++) {
    const char c = tmpl[i];
    if ((c == '{' || c == '}') && i + 1 < tmpl.size() && tmpl[i + 1] == c) {
      out += c;
      i++;
      continue;
    }
    if (c == '}') return Status::Error(what + ": a '}' without its '{' (write '}}' for a literal brace)");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t end = tmpl.find('}', i);
    if (end == std::string::npos)
      return Status::Error(what + ": a '{' that never closes (write '{{' for a literal brace)");
    const std::string name = tmpl.substr(i + 1, end - i - 1);
    auto it = vars.find(name);
    if (it == vars.end()) {
      std::string known;
      for (const auto& [k, v] : vars) known += (known.empty() ? "" : ", ") + ("{" + k + "}");
      return Status::Error(what + ": {" + name + "} is not a variable here (known: " + known + ")");
    }
    out += it->second;
    i = end;
  }
  return out;
}

Result<const WorkloadConfig*> ProjectConfig::Workload(const std::string& name) const {
  const std::string want = name.empty() ? default_workload : name;
  std::string known;
  for (const WorkloadConfig& w : workloads) {
    if (w.name == want) return &w;
    known += (known.empty() ? "" : ", ") + w.name;
  }
  return Status::Error(source + ": no workload '" + want + "' (known: " + known + ")");
}

Result<ProjectConfig> ParseProjectConfig(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::Error(source + ":" + std::to_string(e.source().begin.line) +
                         ": not valid TOML: " + std::string(e.description()));
  }
  Reader r(source);
  ProjectConfig c;
  c.source = source;
  VERITY_RETURN_IF_ERROR(r.OnlyKeys(root, "", {"default_workload", "build", "workload", "parity"}));
  VERITY_RETURN_IF_ERROR(ReadBuild(r, root, &c));
  VERITY_RETURN_IF_ERROR(ReadWorkloads(r, root, &c));
  VERITY_RETURN_IF_ERROR(ReadParity(r, root, &c));
  VERITY_ASSIGN_OR_RETURN(c.default_workload, r.String(root, "", "default_workload", false));
  if (c.default_workload.empty()) {
    if (c.workloads.size() > 1)
      return r.Err(nullptr, "default_workload", "required when there is more than one workload");
    c.default_workload = c.workloads[0].name;
  } else if (!c.Workload(c.default_workload).ok()) {
    return r.Err(root.get("default_workload"), "default_workload", c.Workload(c.default_workload).status().message());
  }
  return c;
}

Result<ProjectConfig> LoadProjectConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot read the project config");
  std::stringstream s;
  s << in.rdbuf();
  return ParseProjectConfig(s.str(), path);
}

}  // namespace verity::measure
