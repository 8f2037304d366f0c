// load_layer: a layer out of a Hugging Face checkpoint directory. Only the files that hold the layer's
// tensors are read (for a sharded checkpoint, the shards the index names for them).
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hanpu/layer.h"
#include "hanpu/safetensors.h"

namespace hanpu {
namespace {

Status read_text(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound(path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

// Where transformers puts a model's layers: text models, the language model of a multimodal Qwen3.5,
// and Kimi Linear's attention slot (self_attn holds its KDA module).
std::vector<std::string> layer_prefixes(LayerArch arch, int64_t i) {
  const std::string n = std::to_string(i);
  const std::string module = arch == LayerArch::kKimiLinear ? "self_attn." : "linear_attn.";
  return {"model.layers." + n + "." + module, "model.language_model.layers." + n + "." + module};
}

}  // namespace

Status read_layer_checkpoint(const std::string& model_dir, int64_t layer_index, LayerSpec* spec, TensorFile* weights,
                             std::string* origin) {
  const std::string config_path = model_dir + "/config.json";
  std::string text;
  HANPU_RETURN_IF_ERROR(read_text(config_path, &text));
  HANPU_RETURN_IF_ERROR(layer_spec_from_config(text, config_path, layer_index, spec));

  // name -> file: from the shard index, or every tensor of the one file.
  std::map<std::string, std::string> file_of;
  const std::string index_path = model_dir + "/model.safetensors.index.json";
  std::map<std::string, TensorFile> files;
  if (exists(index_path)) {
    *origin = index_path + ": ";
    HANPU_RETURN_IF_ERROR(read_text(index_path, &text));
    const nlohmann::json idx = nlohmann::json::parse(text, nullptr, false);
    if (idx.is_discarded() || !idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
      return DataLoss(index_path + ": expected a JSON object with a weight_map object");
    for (const auto& [name, file] : idx["weight_map"].items()) {
      if (!file.is_string()) return DataLoss(index_path + ": weight_map." + name + " is not a file name");
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        return DataLoss(index_path + ": weight_map." + name + " names a file outside the directory: " + f);
      file_of[name] = model_dir + "/" + f;
    }
  } else {
    const std::string path = model_dir + "/model.safetensors";
    *origin = path + ": ";
    HANPU_RETURN_IF_ERROR(read_safetensors(path, &files[path]));
    for (const auto& [name, t] : files[path].tensors) file_of[name] = path;
  }
  std::string prefix;
  for (const std::string& p : layer_prefixes(spec->arch, layer_index)) {
    auto it = file_of.lower_bound(p);
    if (it != file_of.end() && it->first.compare(0, p.size(), p) == 0) {
      prefix = p;
      break;
    }
  }
  if (prefix.empty())
    return NotFound(model_dir + ": no tensor of layer " + std::to_string(layer_index) + " (looked for " +
                    layer_prefixes(spec->arch, layer_index)[0] + "*)");
  *origin += prefix;
  // Read the shards that hold this layer's tensors and move them out under their relative names; a tensor
  // the index lists but its shard lacks stays absent (reported as missing by Layer::create).
  weights->tensors.clear();
  for (auto it = file_of.lower_bound(prefix); it != file_of.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    if (!files.count(it->second)) HANPU_RETURN_IF_ERROR(read_safetensors(it->second, &files[it->second]));
    auto t = files[it->second].tensors.find(it->first);
    if (t != files[it->second].tensors.end()) weights->tensors[it->first.substr(prefix.size())] = std::move(t->second);
  }
  return Status::Ok();
}

Status load_layer(const std::string& model_dir, int64_t layer_index, Precision precision, std::unique_ptr<Layer>* out) {
  LayerSpec spec;
  TensorFile weights;
  std::string origin;
  HANPU_RETURN_IF_ERROR(read_layer_checkpoint(model_dir, layer_index, &spec, &weights, &origin));
  std::map<std::string, TensorView> views;
  const WeightLookup lookup = [&](const std::string& name, std::string* where) -> const TensorView* {
    *where = origin + name;
    const Tensor* t = weights.find(name);
    return t ? &(views[name] = t->view()) : nullptr;
  };
  return Layer::create(spec, lookup, precision, out);
}

}  // namespace hanpu
