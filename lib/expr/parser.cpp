// Recursive-descent parser with Python's precedence, lowest first:
//   or_test    := and_test ('or' and_test)*
//   and_test   := not_test ('and' not_test)*
//   not_test   := 'not' not_test | comparison
//   comparison := arith (('=='|'!='|'<'|'<='|'>'|'>=') arith)*
//   arith      := term (('+'|'-') term)*
//   term       := factor (('*'|'/'|'//'|'%') factor)*
//   factor     := ('-'|'+') factor | atom
//   atom       := NUMBER | 'True' | 'False' | '(' or_test ')'
//               | NAME | NAME '.' 'shape' '[' or_test ']'
//               | NAME ('[' or_test (',' or_test)* ']')+ ['.' 'item' '(' ')']
//               | 'len' '(' NAME ')'
// Every way of nesting (parentheses, brackets, 'not', unary signs) goes
// through a depth counter, so hostile input is refused long before the
// stack is at risk.
#include <new>

#include "common/limits.hpp"
#include "expr/ast.hpp"
#include "expr/lexer.hpp"

namespace kb::expr {
namespace detail {
namespace {

using NodeId = std::uint32_t;

#define KB_EXPR_TRY_NODE(var, expr)                    \
  auto var##_result = (expr);                          \
  if (!var##_result.ok()) return std::move(var##_result).error(); \
  const NodeId var = *var##_result

class Parser {
 public:
  Parser(Tree& tree, std::vector<Token> tokens) : t_(tree), toks_(std::move(tokens)) {}

  Result<NodeId> parse_all() {
    KB_EXPR_TRY_NODE(root, parse_or());
    if (peek().kind != Tok::end) return unexpected(peek(), "an operator or end of expression");
    return root;
  }

 private:
  const Token& peek(std::size_t ahead = 0) const {
    // The token list ends in one end/error token; never read past it.
    const std::size_t k = k_ + ahead;
    return k < toks_.size() ? toks_[k] : toks_.back();
  }
  const Token& advance() {
    const Token& t = toks_[k_];
    if (k_ + 1 < toks_.size()) ++k_;
    return t;
  }
  bool accept(Tok kind) {
    if (peek().kind != kind) return false;
    advance();
    return true;
  }

  Error fail(const Token& at, std::string what) const {
    return make_error(Code::parse_error, "column " + std::to_string(at.begin + 1) + ": " + std::move(what));
  }
  // The message for a token the grammar has no place for.
  Error unexpected(const Token& at, std::string_view expected) const {
    switch (at.kind) {
      case Tok::error: return fail(at, at.message);
      case Tok::unsupported: return fail(at, "operator " + describe(at, t_.text) + " is not supported");
      case Tok::kw_reserved: return fail(at, "keyword " + describe(at, t_.text) + " is not supported");
      default: return fail(at, "expected " + std::string(expected) + " but found " + describe(at, t_.text));
    }
  }
  Result<Unit> expect(Tok kind, std::string_view what) {
    if (accept(kind)) return Unit{};
    return unexpected(peek(), what);
  }

  // Runs one nested level; refuses to go deeper than the limit.
  template <class F>
  Result<NodeId> nested(F&& f) {
    if (depth_ >= limits::max_expression_depth) {
      return make_error(Code::limit_exceeded, "column " + std::to_string(peek().begin + 1) +
                                                  ": expression is nested deeper than " +
                                                  std::to_string(limits::max_expression_depth) + " levels");
    }
    ++depth_;
    Result<NodeId> r = f();
    --depth_;
    return r;
  }

  NodeId add(Node n) {
    n.outer_begin = n.begin;
    n.outer_end = n.end;
    t_.nodes.push_back(std::move(n));
    return static_cast<NodeId>(t_.nodes.size() - 1);
  }
  Node& node(NodeId id) { return t_.nodes[id]; }

  static void note(std::vector<std::string>& names, std::string_view name) {
    for (const auto& n : names) {
      if (n == name) return;
    }
    names.emplace_back(name);
  }

  // An n-ary chain node over `first` and what follows it.
  NodeId chain(NodeKind kind, NodeId first) {
    Node n;
    n.kind = kind;
    n.children.push_back(first);
    n.begin = node(first).outer_begin;
    n.end = node(first).outer_end;
    return add(std::move(n));
  }
  void extend(NodeId chain_id, NodeId next) {
    node(chain_id).children.push_back(next);
    node(chain_id).end = node(next).outer_end;
    node(chain_id).outer_end = node(chain_id).end;
  }

  Result<NodeId> parse_or() {
    return nested([&]() -> Result<NodeId> {
      KB_EXPR_TRY_NODE(first, parse_and());
      if (peek().kind != Tok::kw_or) return first;
      const NodeId id = chain(NodeKind::logical_or, first);
      while (accept(Tok::kw_or)) {
        KB_EXPR_TRY_NODE(next, parse_and());
        extend(id, next);
      }
      return id;
    });
  }

  Result<NodeId> parse_and() {
    KB_EXPR_TRY_NODE(first, parse_not());
    if (peek().kind != Tok::kw_and) return first;
    const NodeId id = chain(NodeKind::logical_and, first);
    while (accept(Tok::kw_and)) {
      KB_EXPR_TRY_NODE(next, parse_not());
      extend(id, next);
    }
    return id;
  }

  Result<NodeId> parse_not() {
    if (peek().kind != Tok::kw_not) return parse_comparison();
    const std::uint32_t begin = advance().begin;
    return nested([&]() -> Result<NodeId> {
      KB_EXPR_TRY_NODE(operand, parse_not());
      Node n;
      n.kind = NodeKind::logical_not;
      n.children.push_back(operand);
      n.begin = begin;
      n.end = node(operand).outer_end;
      return add(std::move(n));
    });
  }

  static bool comparison_op(Tok k, Op& op) {
    switch (k) {
      case Tok::eq: op = Op::eq; return true;
      case Tok::ne: op = Op::ne; return true;
      case Tok::lt: op = Op::lt; return true;
      case Tok::le: op = Op::le; return true;
      case Tok::gt: op = Op::gt; return true;
      case Tok::ge: op = Op::ge; return true;
      default: return false;
    }
  }
  static bool additive_op(Tok k, Op& op) {
    if (k == Tok::plus) op = Op::add;
    else if (k == Tok::minus) op = Op::sub;
    else return false;
    return true;
  }
  static bool multiplicative_op(Tok k, Op& op) {
    switch (k) {
      case Tok::star: op = Op::mul; return true;
      case Tok::slash: op = Op::truediv; return true;
      case Tok::dslash: op = Op::floordiv; return true;
      case Tok::percent: op = Op::mod; return true;
      default: return false;
    }
  }

  // One left-to-right chain of binary operators at one precedence level.
  template <class Operand>
  Result<NodeId> parse_chain(NodeKind kind, bool (*match)(Tok, Op&), Operand operand) {
    KB_EXPR_TRY_NODE(first, operand());
    Op op{};
    if (!match(peek().kind, op)) return first;
    const NodeId id = chain(kind, first);
    while (match(peek().kind, op)) {
      advance();
      KB_EXPR_TRY_NODE(next, operand());
      node(id).ops.push_back(op);
      extend(id, next);
    }
    return id;
  }

  Result<NodeId> parse_comparison() {
    return parse_chain(NodeKind::compare, &comparison_op, [&] { return parse_arith(); });
  }
  Result<NodeId> parse_arith() {
    return parse_chain(NodeKind::arith, &additive_op, [&] { return parse_term(); });
  }
  Result<NodeId> parse_term() {
    return parse_chain(NodeKind::arith, &multiplicative_op, [&] { return parse_factor(); });
  }

  Result<NodeId> parse_factor() {
    const Tok k = peek().kind;
    if (k != Tok::minus && k != Tok::plus) return parse_postfix_checked();
    const std::uint32_t begin = advance().begin;
    return nested([&]() -> Result<NodeId> {
      KB_EXPR_TRY_NODE(operand, parse_factor());
      Node n;
      n.kind = k == Tok::minus ? NodeKind::negate : NodeKind::plus;
      n.children.push_back(operand);
      n.begin = begin;
      n.end = node(operand).outer_end;
      return add(std::move(n));
    });
  }

  // An atom, then a clear message if something tries to index, call or take
  // an attribute of a value that does not support it.
  Result<NodeId> parse_postfix_checked() {
    KB_EXPR_TRY_NODE(id, parse_atom());
    switch (peek().kind) {
      case Tok::lbracket: return fail(peek(), "only a tensor name can be indexed");
      case Tok::lparen: return fail(peek(), "only len() can be called");
      case Tok::dot: return fail(peek(), "only a tensor name can have an attribute (.shape, or .item() after indexing)");
      default: return id;
    }
  }

  Result<NodeId> parse_atom() {
    const Token& tok = peek();
    switch (tok.kind) {
      case Tok::integer:
      case Tok::floating:
      case Tok::kw_true:
      case Tok::kw_false: {
        Node n;
        n.kind = NodeKind::literal;
        if (tok.kind == Tok::integer) n.value = Value::integer(tok.int_value);
        else if (tok.kind == Tok::floating) n.value = Value::floating(tok.float_value);
        else n.value = Value::boolean(tok.kind == Tok::kw_true);
        n.begin = tok.begin;
        n.end = tok.end;
        advance();
        return add(std::move(n));
      }
      case Tok::lparen: {
        const std::uint32_t begin = advance().begin;
        KB_EXPR_TRY_NODE(inner, parse_or());
        const std::uint32_t end = peek().end;
        KB_TRY(expect(Tok::rparen, "')'"));
        // Diagnostics quote operands with their parentheses.
        node(inner).outer_begin = begin;
        node(inner).outer_end = end;
        return inner;
      }
      case Tok::name: return parse_name();
      default: return unexpected(tok, "an expression");
    }
  }

  std::string_view token_text(const Token& t) const {
    return std::string_view(t_.text).substr(t.begin, t.end - t.begin);
  }

  Result<NodeId> parse_name() {
    const Token& name_tok = advance();
    const std::string_view name = token_text(name_tok);
    Node n;
    n.name = std::string(name);
    n.begin = name_tok.begin;
    n.end = name_tok.end;

    if (peek().kind == Tok::lparen) {
      if (name != "len") return fail(name_tok, "unknown function '" + n.name + "' (only len() is supported)");
      advance();
      const Token& arg = peek();
      if (arg.kind != Tok::name) return unexpected(arg, "a tensor name inside len()");
      advance();
      n.name = std::string(token_text(arg));
      n.end = peek().end;
      KB_TRY(expect(Tok::rparen, "')'"));
      n.kind = NodeKind::length;
      note(t_.tensor_names, n.name);
      return add(std::move(n));
    }

    if (peek().kind == Tok::dot) {
      advance();
      const Token& attr = peek();
      if (attr.kind != Tok::name) return unexpected(attr, "an attribute name after '.'");
      const std::string_view a = token_text(attr);
      if (a == "item") return fail(attr, ".item() needs an indexed element, as in " + n.name + "[0].item()");
      if (a != "shape") return fail(attr, "unknown attribute '" + std::string(a) + "' (only .shape[i] is supported)");
      advance();
      KB_TRY(expect(Tok::lbracket, "'[' after .shape"));
      KB_EXPR_TRY_NODE(index, parse_or());
      n.end = peek().end;
      KB_TRY(expect(Tok::rbracket, "']'"));
      n.kind = NodeKind::shape_dim;
      n.children.push_back(index);
      note(t_.tensor_names, n.name);
      return add(std::move(n));
    }

    if (peek().kind == Tok::lbracket) {
      // x[i][j] and x[i, j] both index dimension after dimension.
      while (accept(Tok::lbracket)) {
        for (;;) {
          KB_EXPR_TRY_NODE(index, parse_or());
          n.children.push_back(index);
          if (!accept(Tok::comma)) break;
        }
        n.end = peek().end;
        KB_TRY(expect(Tok::rbracket, "']' or ','"));
      }
      if (accept(Tok::dot)) {
        const Token& attr = peek();
        if (attr.kind != Tok::name || token_text(attr) != "item") {
          return unexpected(attr, "'item' after '.' (only .item() applies to an element)");
        }
        advance();
        KB_TRY(expect(Tok::lparen, "'('"));
        n.end = peek().end;
        KB_TRY(expect(Tok::rparen, "')'"));
      }
      n.kind = NodeKind::element;
      note(t_.tensor_names, n.name);
      note(t_.data_tensor_names, n.name);
      t_.reads_tensor_data = true;
      return add(std::move(n));
    }

    n.kind = NodeKind::name;
    note(t_.scalar_names, n.name);
    return add(std::move(n));
  }

  Tree& t_;
  std::vector<Token> toks_;
  std::size_t k_ = 0;
  std::size_t depth_ = 0;
};

#undef KB_EXPR_TRY_NODE

void render(const Tree& t, NodeId id, std::string& out) {
  const Node& n = t.nodes[id];
  switch (n.kind) {
    case NodeKind::literal: out += n.value.to_string(); return;
    case NodeKind::name: out += n.name; return;
    case NodeKind::negate:
    case NodeKind::plus:
    case NodeKind::logical_not:
      out += n.kind == NodeKind::negate ? "(-" : n.kind == NodeKind::plus ? "(+" : "(not ";
      render(t, n.children[0], out);
      out += ')';
      return;
    case NodeKind::arith: {
      // Left-associative: show (a + b) - c as such.
      out.append(n.ops.size(), '(');
      render(t, n.children[0], out);
      for (std::size_t i = 0; i < n.ops.size(); ++i) {
        out += ' ';
        out += op_text(n.ops[i]);
        out += ' ';
        render(t, n.children[i + 1], out);
        out += ')';
      }
      return;
    }
    case NodeKind::compare:
    case NodeKind::logical_and:
    case NodeKind::logical_or:
      out += '(';
      for (std::size_t i = 0; i < n.children.size(); ++i) {
        if (i > 0) {
          out += ' ';
          if (n.kind == NodeKind::compare) out += op_text(n.ops[i - 1]);
          else out += n.kind == NodeKind::logical_and ? "and" : "or";
          out += ' ';
        }
        render(t, n.children[i], out);
      }
      out += ')';
      return;
    case NodeKind::shape_dim:
      out += n.name + ".shape[";
      render(t, n.children[0], out);
      out += ']';
      return;
    case NodeKind::element:
      out += n.name;
      for (NodeId c : n.children) {
        out += '[';
        render(t, c, out);
        out += ']';
      }
      return;
    case NodeKind::length: out += "len(" + n.name + ")"; return;
  }
}

const std::vector<std::string>& no_names() {
  static const std::vector<std::string> empty;
  return empty;
}

}  // namespace
}  // namespace detail

const std::string& Expression::text() const noexcept {
  static const std::string empty;
  return tree_ ? tree_->text : empty;
}
const std::vector<std::string>& Expression::scalar_names() const noexcept {
  return tree_ ? tree_->scalar_names : detail::no_names();
}
const std::vector<std::string>& Expression::tensor_names() const noexcept {
  return tree_ ? tree_->tensor_names : detail::no_names();
}
bool Expression::needs_tensor_data() const noexcept { return tree_ && tree_->reads_tensor_data; }
const std::vector<std::string>& Expression::data_tensor_names() const noexcept {
  return tree_ ? tree_->data_tensor_names : detail::no_names();
}

std::string Expression::structure() const {
  std::string out;
  if (tree_) detail::render(*tree_, tree_->root, out);
  return out;
}

Result<Expression> parse(std::string_view text) {
  if (text.size() > limits::max_expression_chars) {
    return make_error(Code::limit_exceeded, "expression is " + std::to_string(text.size()) +
                                                " characters long; the limit is " +
                                                std::to_string(limits::max_expression_chars));
  }
  try {
    auto tree = std::make_shared<detail::Tree>();
    tree->text = std::string(text);
    detail::Parser parser(*tree, detail::tokenize(tree->text));
    auto root = parser.parse_all();
    if (!root.ok()) return std::move(root).error();
    tree->root = *root;
    return Expression(std::move(tree));
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, "out of memory while parsing an expression");
  }
}

}  // namespace kb::expr
