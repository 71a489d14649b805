// The dashboard's static files, embedded in the binary at build time
// (render/embed_assets.cmake): its own scripts and styles from render/web/,
// and uPlot's as npm installed it (tests/npm/node_modules/uplot/dist), so
// `verity report --html` writes a site that needs nothing else, from anywhere.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace verity::reports::assets {

struct Asset {
  const char* name;  // the file name in the site
  const char* data;
  size_t size;
};

const std::vector<Asset>& All();
// nullptr when this build does not carry `name` (uPlot, when npm had not installed it).
const Asset* Find(const std::string& name);

}  // namespace verity::reports::assets
