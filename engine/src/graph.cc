// Tracing imperative code into a Graph, replaying it, and its JSON form.
//
// Note [Tracing by running]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A trace is the imperative forward pass itself: ops run as usual, and invoke() also reports each
// one here. Arrays are identified by (chunk, byte offset, shape), so a value is known however many
// NDArray copies of it exist. An array read but not computed by the trace is either a graph input
// or a constant captured by reference (a parameter captured this way sees later in-place updates).
// An array that shares a traced value's memory under another offset or shape is a view made
// without an op (reshape_view, slice_view); it becomes a view node, so replay aliases memory
// exactly as the imperative code did. Every traced array is held until the trace ends, so chunk
// addresses cannot be reused while the identity map refers to them.
#include "pymx/graph.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "autograd.h"

namespace pymx {
namespace graph {

struct Graph::ConstantCache {
  std::mutex mu;
  std::map<std::pair<int, int>, std::vector<NDArray>> by_device;  // (type, id) -> constants
};

namespace {

struct TracedValue {
  NDArray array;  // held: see Note [Tracing by running]
  ValueRef ref;
};

struct TraceState {
  size_t num_inputs = 0;
  Device trace_device;
  std::vector<GraphNode> nodes;
  std::vector<NDArray> constants;
  // Values by chunk; the newest last (an in-place write shadows the older value).
  std::unordered_map<const Chunk*, std::vector<TracedValue>> values;
};

thread_local TraceState* t_trace = nullptr;

void remember(TraceState& trace, const NDArray& array, ValueRef ref) {
  trace.values[array.chunk().get()].push_back(TracedValue{array, ref});
}

// The reference for `array`, adding a view node or a constant when it is not a traced value.
ValueRef resolve(TraceState& trace, const NDArray& array) {
  auto found = trace.values.find(array.chunk().get());
  if (found != trace.values.end()) {
    const std::vector<TracedValue>& candidates = found->second;
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it)
      if (it->array.same_array(array)) return it->ref;
    // A view of a traced value: find the newest one whose memory contains it.
    const size_t begin = array.byte_offset(), end = begin + array.nbytes();
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
      const NDArray& base = it->array;
      if (base.dtype() != array.dtype() || begin < base.byte_offset() ||
          end > base.byte_offset() + base.nbytes())
        continue;
      GraphNode view;
      view.inputs = {it->ref};
      view.device = array.device();
      view.view_offset =
          static_cast<int64_t>((begin - base.byte_offset()) / dtype_size(array.dtype()));
      view.view_shape = array.shape();
      trace.nodes.push_back(std::move(view));
      const ValueRef ref{ValueRef::Kind::kNode, static_cast<uint32_t>(trace.nodes.size() - 1), 0};
      remember(trace, array, ref);
      return ref;
    }
  }
  // A constant. Keep the autograd mark of a variable (a captured parameter still gets its
  // gradient); drop any recorded history, which belongs to one forward pass only.
  NDArray constant = array;
  const auto& node = constant.autograd_entry().node;
  if (node && !node->is_variable()) constant.autograd_entry() = AutogradEntry();
  trace.constants.push_back(constant);
  const ValueRef ref{ValueRef::Kind::kConstant, static_cast<uint32_t>(trace.constants.size() - 1), 0};
  remember(trace, array, ref);
  return ref;
}

NDArray view_of(const NDArray& base, int64_t offset, const Shape& shape) {
  const int64_t n = shape_size(shape);
  PMX_CHECK(offset >= 0 && offset + n <= base.size(), "graph view of ", n,
            " elements at offset ", offset, " does not fit in an input of shape ",
            shape_str(base.shape()));
  return base.reshape_view({base.size()}).slice_view(offset, offset + n).reshape_view(shape);
}

}  // namespace

bool is_tracing() { return t_trace != nullptr; }

void trace_op(const OpDef& op, const Attrs& attrs, const std::vector<NDArray>& inputs,
              const std::vector<NDArray>& outputs) {
  TraceState& trace = *t_trace;
  GraphNode node;
  node.op = &op;
  node.attrs = attrs;
  node.num_outputs = static_cast<int>(outputs.size());
  node.device = outputs.empty() ? Device::cpu() : outputs[0].device();
  node.inputs.reserve(inputs.size());
  for (const NDArray& input : inputs) node.inputs.push_back(resolve(trace, input));
  trace.nodes.push_back(std::move(node));
  const auto index = static_cast<uint32_t>(trace.nodes.size() - 1);
  for (size_t i = 0; i < outputs.size(); ++i)
    remember(trace, outputs[i], ValueRef{ValueRef::Kind::kNode, index, static_cast<uint32_t>(i)});
}

void begin_trace(const std::vector<NDArray>& inputs) {
  PMX_CHECK(t_trace == nullptr, "begin_trace: this thread is already tracing");
  auto trace = std::make_unique<TraceState>();
  trace->num_inputs = inputs.size();
  trace->trace_device = inputs.empty() ? Device::cpu() : inputs[0].device();
  for (size_t i = 0; i < inputs.size(); ++i) {
    PMX_CHECK(!inputs[i].is_none(), "begin_trace: input ", i, " is a none array");
    remember(*trace, inputs[i], ValueRef{ValueRef::Kind::kInput, static_cast<uint32_t>(i), 0});
  }
  t_trace = trace.release();
}

void abort_trace() {
  delete t_trace;
  t_trace = nullptr;
}

std::shared_ptr<Graph> end_trace(const std::vector<NDArray>& outputs) {
  PMX_CHECK(t_trace != nullptr, "end_trace: this thread is not tracing");
  std::unique_ptr<TraceState> trace(t_trace);
  t_trace = nullptr;
  auto graph = std::make_shared<Graph>();
  for (size_t i = 0; i < outputs.size(); ++i) {
    PMX_CHECK(!outputs[i].is_none(), "end_trace: output ", i, " is a none array");
    graph->outputs_.push_back(resolve(*trace, outputs[i]));
  }
  graph->num_inputs_ = trace->num_inputs;
  graph->trace_device_ = trace->trace_device;
  graph->nodes_ = std::move(trace->nodes);
  graph->constants_ = std::move(trace->constants);
  graph->constant_cache_ = std::make_shared<Graph::ConstantCache>();
  return graph;
}

NDArray Graph::constant_on(size_t index, Device device) const {
  const NDArray& constant = constants_[index];
  if (constant.device() == device || constant.device() != trace_device_) return constant;
  std::lock_guard<std::mutex> lock(constant_cache_->mu);
  std::vector<NDArray>& copies =
      constant_cache_->by_device[{static_cast<int>(device.type), device.id}];
  if (copies.empty()) copies.resize(constants_.size());
  if (copies[index].is_none()) copies[index] = constant.copy_to(device);
  return copies[index];
}

// Note [Freeing intermediates]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// run() drops its reference to each node output right after the last node that reads it, so the
// storage allocator can hand the memory to a later node of the same run (the engine frees a
// chunk only after its queued readers finish). While recording, the tape keeps what backward
// needs, so this changes nothing there.
std::vector<NDArray> Graph::run(const std::vector<NDArray>& inputs) const {
  PMX_CHECK(inputs.size() == num_inputs_, "graph run: the graph takes ", num_inputs_,
            " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    PMX_CHECK(!inputs[i].is_none(), "graph run: input ", i, " is a none array");
  const Device run_device = inputs.empty() ? trace_device_ : inputs[0].device();

  // last_use[node][output]: index of the last node reading it; outputs are never freed.
  std::vector<std::vector<size_t>> last_use(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) last_use[n].assign(nodes_[n].num_outputs, 0);
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (const ValueRef& ref : nodes_[n].inputs)
      if (ref.kind == ValueRef::Kind::kNode) last_use[ref.index][ref.output] = n;
  for (const ValueRef& ref : outputs_)
    if (ref.kind == ValueRef::Kind::kNode) last_use[ref.index][ref.output] = nodes_.size();

  std::vector<std::vector<NDArray>> values(nodes_.size());
  auto fetch = [&](const ValueRef& ref) -> NDArray {
    if (ref.kind == ValueRef::Kind::kInput) return inputs[ref.index];
    if (ref.kind == ValueRef::Kind::kConstant) return constant_on(ref.index, run_device);
    return values[ref.index][ref.output];
  };

  std::vector<NDArray> args;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const GraphNode& node = nodes_[n];
    args.clear();
    for (const ValueRef& ref : node.inputs) args.push_back(fetch(ref));
    if (node.op == nullptr) {
      values[n] = {view_of(args.at(0), node.view_offset, node.view_shape)};
    } else {
      const Device device = node.device == trace_device_ ? run_device : node.device;
      values[n] = invoke(*node.op, args, node.attrs, device);
    }
    for (const ValueRef& ref : node.inputs)
      if (ref.kind == ValueRef::Kind::kNode && last_use[ref.index][ref.output] == n)
        values[ref.index][ref.output] = NDArray();
  }
  std::vector<NDArray> results;
  results.reserve(outputs_.size());
  for (const ValueRef& ref : outputs_) results.push_back(fetch(ref));
  return results;
}

// ---------------------------------------------------------------------------------------------
// JSON.
// ---------------------------------------------------------------------------------------------
namespace {

void write_string(std::ostringstream& os, const std::string& s) {
  os << '"';
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

void write_attrs(std::ostringstream& os, const std::vector<std::pair<std::string, std::string>>& items) {
  os << "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) os << ", ";
    write_string(os, items[i].first);
    os << ": ";
    write_string(os, items[i].second);
  }
  os << "}";
}

// A parsed JSON value: just what graph JSON needs (no true/false/null).
struct Json {
  enum class Type { kString, kNumber, kArray, kObject } type = Type::kNumber;
  std::string str;
  double num = 0;
  std::vector<Json> items;                          // array
  std::vector<std::pair<std::string, Json>> members;  // object

  const Json* member(const std::string& key) const {
    for (const auto& kv : members)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : text_(text) {}

  Json parse_document() {
    Json value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    PMX_THROW(Status::kInvalidArg, "graph JSON: ", what, " at offset ", pos_);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(c == ':' ? "expected ':'" : c == ',' ? "expected ','" : "unexpected character");
  }

  Json parse_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    const char c = text_[pos_];
    Json value;
    if (c == '"') {
      value.type = Json::Type::kString;
      value.str = parse_string();
    } else if (c == '[') {
      value.type = Json::Type::kArray;
      ++pos_;
      if (!consume(']')) {
        do value.items.push_back(parse_value());
        while (consume(','));
        expect(']');
      }
    } else if (c == '{') {
      value.type = Json::Type::kObject;
      ++pos_;
      if (!consume('}')) {
        do {
          skip_space();
          if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a key string");
          std::string key = parse_string();
          expect(':');
          value.members.emplace_back(std::move(key), parse_value());
        } while (consume(','));
        expect('}');
      }
    } else {
      size_t used = 0;
      try {
        value.num = std::stod(text_.substr(pos_, 32), &used);
      } catch (const std::exception&) {
        fail("expected a value");
      }
      pos_ += used;
    }
    return value;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      c = text_[pos_++];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          const unsigned code = std::stoul(text_.substr(pos_, 4), nullptr, 16);
          pos_ += 4;
          if (code >= 0x80) fail("non-ASCII \\u escape");
          out += static_cast<char>(code);
          break;
        }
        default: out += c;  // \" \\ \/
      }
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    ++pos_;  // closing quote
    return out;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

const Json& require(const Json& object, const std::string& key, Json::Type type, size_t node) {
  const Json* value = object.member(key);
  PMX_CHECK(value != nullptr && value->type == type, "graph JSON: node ", node,
            " lacks a valid \"", key, "\"");
  return *value;
}

constexpr const char* kViewOp = "_view";

}  // namespace

std::string Graph::to_json() const {
  // JSON node ids: data inputs, then constants, then one per graph node.
  const size_t first_node = num_inputs_ + constants_.size();
  auto json_id = [&](const ValueRef& ref) -> size_t {
    if (ref.kind == ValueRef::Kind::kInput) return ref.index;
    if (ref.kind == ValueRef::Kind::kConstant) return num_inputs_ + ref.index;
    return first_node + ref.index;
  };
  std::ostringstream os;
  os << "{\n  \"nodes\": [";
  bool first = true;
  auto begin_node = [&]() {
    os << (first ? "\n    " : ",\n    ");
    first = false;
  };
  for (size_t i = 0; i < num_inputs_; ++i) {
    begin_node();
    os << R"({"op": "null", "name": "data)" << i << R"(", "inputs": []})";
  }
  for (size_t i = 0; i < constants_.size(); ++i) {
    begin_node();
    os << R"({"op": "null", "name": "const)" << i << R"(", "attrs": )";
    write_attrs(os, {{"__shape__", shape_str(constants_[i].shape())},
                     {"__dtype__", dtype_name(constants_[i].dtype())}});
    os << R"(, "inputs": []})";
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const GraphNode& node = nodes_[n];
    const std::string op_name = node.op ? node.op->name : kViewOp;
    std::vector<std::pair<std::string, std::string>> attrs;
    if (node.op) {
      attrs = node.attrs.items();
      if (node.inputs.empty()) attrs.emplace_back("__device__", node.device.str());
    } else {
      attrs = {{"offset", std::to_string(node.view_offset)}, {"shape", shape_str(node.view_shape)}};
    }
    begin_node();
    os << R"({"op": )";
    write_string(os, op_name);
    os << R"(, "name": )";
    write_string(os, op_name + std::to_string(n));
    os << R"(, "attrs": )";
    write_attrs(os, attrs);
    os << R"(, "inputs": [)";
    for (size_t k = 0; k < node.inputs.size(); ++k)
      os << (k ? ", " : "") << "[" << json_id(node.inputs[k]) << ", " << node.inputs[k].output
         << ", 0]";
    os << "]}";
  }
  os << "\n  ],\n  \"arg_nodes\": [";
  for (size_t i = 0; i < first_node; ++i) os << (i ? ", " : "") << i;
  os << "],\n  \"heads\": [";
  for (size_t i = 0; i < outputs_.size(); ++i)
    os << (i ? ", " : "") << "[" << json_id(outputs_[i]) << ", " << outputs_[i].output << ", 0]";
  // Ops without inputs created their results on this device; run() moves them with the inputs.
  os << "],\n  \"attrs\": ";
  write_attrs(os, {{"trace_device", trace_device_.str()}});
  os << "\n}\n";
  return os.str();
}

std::shared_ptr<Graph> Graph::from_json(const std::string& json) {
  const Json root = JsonParser(json).parse_document();
  PMX_CHECK(root.type == Json::Type::kObject, "graph JSON: the document is not an object");
  const Json* nodes = root.member("nodes");
  const Json* heads = root.member("heads");
  PMX_CHECK(nodes && nodes->type == Json::Type::kArray && heads &&
                heads->type == Json::Type::kArray,
            "graph JSON: \"nodes\" and \"heads\" must be arrays");

  auto graph = std::make_shared<Graph>();
  graph->constant_cache_ = std::make_shared<Graph::ConstantCache>();
  if (const Json* attrs = root.member("attrs"))
    if (const Json* device = attrs->member("trace_device"))
      if (device->type == Json::Type::kString) graph->trace_device_ = parse_device(device->str);
  // Every "null" node is an input, in order; other nodes map to graph nodes.
  std::vector<ValueRef> ref_of(nodes->items.size());
  std::vector<int> outputs_of(nodes->items.size(), 0);
  auto parse_ref = [&](const Json& entry, size_t node) {
    PMX_CHECK(entry.type == Json::Type::kArray && entry.items.size() >= 2 &&
                  entry.items[0].type == Json::Type::kNumber &&
                  entry.items[1].type == Json::Type::kNumber,
              "graph JSON: node ", node, " has a malformed input entry");
    const double id = entry.items[0].num, out = entry.items[1].num;
    PMX_CHECK(id >= 0 && id < node && id == std::floor(id) && out >= 0 &&
                  out < outputs_of[static_cast<size_t>(id)] && out == std::floor(out),
              "graph JSON: node ", node, " refers to output ", out, " of node ", id,
              ", which is not an earlier node's output");
    ValueRef ref = ref_of[static_cast<size_t>(id)];
    ref.output = static_cast<uint32_t>(out);
    return ref;
  };

  for (size_t i = 0; i < nodes->items.size(); ++i) {
    const Json& item = nodes->items[i];
    PMX_CHECK(item.type == Json::Type::kObject, "graph JSON: node ", i, " is not an object");
    const std::string& op_name = require(item, "op", Json::Type::kString, i).str;
    if (op_name == "null") {
      ref_of[i] = ValueRef{ValueRef::Kind::kInput, static_cast<uint32_t>(graph->num_inputs_++), 0};
      outputs_of[i] = 1;
      continue;
    }
    GraphNode node;
    if (const Json* attrs = item.member("attrs")) {
      PMX_CHECK(attrs->type == Json::Type::kObject, "graph JSON: node ", i, " has bad \"attrs\"");
      for (const auto& kv : attrs->members) {
        PMX_CHECK(kv.second.type == Json::Type::kString, "graph JSON: node ", i, " attribute '",
                  kv.first, "' is not a string");
        if (kv.first == "__device__")
          node.device = parse_device(kv.second.str);
        else
          node.attrs.set(kv.first, kv.second.str);
      }
    }
    for (const Json& entry : require(item, "inputs", Json::Type::kArray, i).items)
      node.inputs.push_back(parse_ref(entry, i));
    if (op_name == kViewOp) {
      PMX_CHECK(node.inputs.size() == 1, "graph JSON: view node ", i, " needs one input");
      node.view_offset = node.attrs.get_int("offset");
      node.view_shape = node.attrs.get_shape("shape");
      node.attrs = Attrs();
    } else {
      node.op = &op_registry::get(op_name);
      node.num_outputs = node.op->num_outputs(node.attrs);
    }
    outputs_of[i] = node.num_outputs;
    graph->nodes_.push_back(std::move(node));
    ref_of[i] = ValueRef{ValueRef::Kind::kNode, static_cast<uint32_t>(graph->nodes_.size() - 1), 0};
  }
  for (const Json& head : heads->items) graph->outputs_.push_back(parse_ref(head, nodes->items.size()));
  return graph;
}

}  // namespace graph
}  // namespace pymx
