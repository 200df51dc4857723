#pragma once

// Loading YAML with yaml-cpp 0.7 (Debian 12) safely: its parser never ends some documents
// that start with ',' ("," or "&a ,"), allocating until bad_alloc (found by
// //client/job:job_file_fuzz). Every file or flag value Baton reads as YAML (job files,
// --set overrides, the CLI config, the coordinator's queue file) goes through these.

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace baton {

// YAML::LoadAll, first checking that parsing `text` ends: a first pass counts the parse
// events and gives up past 4 per byte of text (+16); every event consumes at least one
// byte except a document's start and end and an implicit null, so honest YAML stays far
// below. Throws YAML::Exception (a ParserException "YAML the parser cannot end" at the
// bound).
std::vector<YAML::Node> LoadAllBounded(const std::string& text);

// The first document of LoadAllBounded (a null node if there is none). Throws as it does.
YAML::Node LoadBounded(const std::string& text);

}  // namespace baton
