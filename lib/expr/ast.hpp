// Internal: the parsed tree of an Expression. Nodes live in one vector and
// refer to their children by index, so destroying a tree never recurses.
// Operator chains (a + b - c, a < b <= c, a and b and c) are single n-ary
// nodes, so the tree is only as tall as the text's nesting, which the parser
// caps at limits::max_expression_depth; evaluation recursion is bounded too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "expr/expr.hpp"

namespace kb::expr::detail {

enum class NodeKind : std::uint8_t {
  literal,     // value
  name,        // name (a scalar)
  negate,      // -children[0]
  plus,        // +children[0]
  logical_not, // not children[0]
  arith,       // children[0] ops[0] children[1] ops[1] ... (+ - * / // %)
  compare,     // children[0] ops[0] children[1] ... (Python chaining)
  logical_and, // children[0] and children[1] and ...
  logical_or,  // children[0] or children[1] or ...
  shape_dim,   // name.shape[children[0]]
  element,     // name[children[0]][children[1]]... (optionally .item())
  length,      // len(name)
};

enum class Op : std::uint8_t {
  add, sub, mul, truediv, floordiv, mod,
  eq, ne, lt, le, gt, ge,
};

std::string_view op_text(Op op) noexcept;

struct Node {
  NodeKind kind = NodeKind::literal;
  Value value;                          // literal
  std::string name;                     // name, shape_dim, element, length
  std::vector<std::uint32_t> children;  // indices into Tree::nodes
  std::vector<Op> ops;                  // arith, compare: children.size() - 1
  std::uint32_t begin = 0;              // byte span of the node in the text
  std::uint32_t end = 0;
  std::uint32_t outer_begin = 0;        // the span widened by enclosing parentheses
  std::uint32_t outer_end = 0;
};

struct Tree {
  std::string text;
  std::vector<Node> nodes;
  std::uint32_t root = 0;
  std::vector<std::string> scalar_names;
  std::vector<std::string> tensor_names;
  std::vector<std::string> data_tensor_names;  // the subset read element by element (x[i])
  bool reads_tensor_data = false;

  std::string_view span(const Node& n) const {
    return std::string_view(text).substr(n.begin, n.end - n.begin);
  }
};

}  // namespace kb::expr::detail
