// config.json -> LayerSpec. Field names and defaults are those of transformers 5.24's configuration classes
// (configuration_qwen3_next.py, configuration_qwen3_5.py, configuration_kimi_linear.py): the head counts and
// dimensions are required (a config without them is not a linear-attention model), the conv kernel (4), the
// norm's eps (1e-6 Qwen, 1e-5 Kimi) and the activation (silu) take the classes' defaults when absent.
#include <string>

#include "core/json_reader.h"
#include "hanpu/layer.h"

namespace hanpu {

const char* layer_arch_name(LayerArch a) {
  switch (a) {
    case LayerArch::kQwen3Next: return "qwen3_next";
    case LayerArch::kQwen3_5: return "qwen3_5";
    case LayerArch::kKimiLinear: return "kimi_linear";
  }
  return "?";
}

namespace {

using nlohmann::json;

// The type of layer i: layer_types[i] when present, else transformers' default rule for the model.
std::string layer_type(const JsonReader& r, LayerArch arch, int64_t i, int64_t layers) {
  const json& j = r.raw();
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& types = r.array("layer_types");
    if (static_cast<int64_t>(types.size()) != layers) {
      r.fail_at("layer_types", "has " + std::to_string(types.size()) + " entries, num_hidden_layers is " +
                                   std::to_string(layers));
      return "";
    }
    if (!types[i].is_string()) {
      r.fail_at("layer_types", "entry " + std::to_string(i) + " is not a string");
      return "";
    }
    return types[i].get<std::string>();
  }
  if (arch == LayerArch::kKimiLinear) {
    // linear_attn_config.kda_layers: 1-based indices of the KDA layers (the checkpoint form).
    const JsonReader lac = r.child("linear_attn_config");
    for (const json& n : lac.array("kda_layers"))
      if (n.is_number_integer() && n.get<int64_t>() == i + 1) return "linear_attention";
    return "full_attention";
  }
  const int64_t interval = j.contains("full_attention_interval") ? r.integer("full_attention_interval", 1, 1 << 20) : 4;
  return (i + 1) % interval ? "linear_attention" : "full_attention";
}

}  // namespace

Status layer_spec_from_config(const std::string& json_text, const std::string& origin, int64_t layer_index,
                              LayerSpec* out) {
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return DataLoss(origin + ": not a JSON object");
  const JsonReader root(doc, "");
  const std::string model_type = root.str("model_type");
  if (!root.ok()) return InvalidArgument(origin + ": " + root.status().message());
  LayerSpec s;
  const json* text = &doc;
  std::string where = "";
  if (model_type == "qwen3_next") {
    s.arch = LayerArch::kQwen3Next;
  } else if (model_type == "qwen3_5" || model_type == "qwen3_5_text" || model_type == "qwen3_5_moe" ||
             model_type == "qwen3_5_moe_text") {
    s.arch = LayerArch::kQwen3_5;
    if (doc.contains("text_config")) {  // the multimodal checkpoint: the language model's fields are inside
      text = &doc["text_config"];
      where = "text_config";
    }
  } else if (model_type == "kimi_linear") {
    s.arch = LayerArch::kKimiLinear;
  } else {
    return InvalidArgument(origin + ": model_type '" + model_type +
                           "' has no linear-attention layer hanpu runs (qwen3_next, qwen3_5, qwen3_5_text, kimi_linear)");
  }
  const JsonReader r(*text, where);
  const int64_t layers = r.integer("num_hidden_layers", 1, 1 << 20);
  s.hidden_size = r.integer("hidden_size", 1, 1 << 20);
  if (s.arch == LayerArch::kKimiLinear) {
    // transformers' names, or the checkpoint's linear_attn_config {num_heads, head_dim, short_conv_kernel_size}.
    const bool nested = text->contains("linear_attn_config") && !text->contains("linear_num_heads");
    const JsonReader lac = nested ? r.child("linear_attn_config") : r;
    s.num_k_heads = s.num_v_heads = lac.integer(nested ? "num_heads" : "linear_num_heads", 1, 4096);
    s.head_k_dim = s.head_v_dim = lac.integer(nested ? "head_dim" : "linear_head_dim", 1, 256);
    const char* conv_key = nested ? "short_conv_kernel_size" : "linear_conv_kernel_dim";
    if (lac.raw().contains(conv_key)) s.conv_kernel = lac.integer(conv_key, 1, 64);
    s.rms_norm_eps = 1e-5;
  } else {
    s.num_k_heads = r.integer("linear_num_key_heads", 1, 4096);
    s.num_v_heads = r.integer("linear_num_value_heads", 1, 4096);
    s.head_k_dim = r.integer("linear_key_head_dim", 1, 256);
    s.head_v_dim = r.integer("linear_value_head_dim", 1, 1 << 16);
    if (text->contains("linear_conv_kernel_dim")) s.conv_kernel = r.integer("linear_conv_kernel_dim", 1, 64);
    s.rms_norm_eps = 1e-6;
  }
  if (text->contains("rms_norm_eps")) s.rms_norm_eps = r.num("rms_norm_eps");
  if (text->contains("hidden_act")) {
    const std::string act = r.str("hidden_act");
    if (r.ok() && act != "silu" && act != "swish")
      r.fail_at("hidden_act", "'" + act + "': the short convolution's activation must be silu");
  }
  if (r.ok() && s.num_v_heads % s.num_k_heads != 0)
    r.fail_at("linear_num_value_heads", std::to_string(s.num_v_heads) + " is not a multiple of linear_num_key_heads " +
                                            std::to_string(s.num_k_heads));
  if (r.ok() && !(s.rms_norm_eps > 0)) r.fail_at("rms_norm_eps", "expected > 0");
  if (r.ok() && (layer_index < 0 || layer_index >= layers))
    return InvalidArgument(origin + ": layer " + std::to_string(layer_index) + " does not exist (num_hidden_layers " +
                           std::to_string(layers) + ")");
  const std::string type = r.ok() ? layer_type(r, s.arch, layer_index, layers) : "";
  if (!r.ok()) return InvalidArgument(origin + ": " + r.status().message());
  if (type != "linear_attention")
    return InvalidArgument(origin + ": layer " + std::to_string(layer_index) + " is a '" + type +
                           "' layer, not a linear_attention layer");
  *out = s;
  return Status::Ok();
}

}  // namespace hanpu
