#include "plugin/build.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "plugin/build_config.h"
#include "schema/io.hpp"

namespace kb::plugin {

extern const char* const embedded_kb_h;      // include/kb/kb.h (embedded_headers.cpp, generated)
extern const char* const embedded_dlpack_h;  // the dlpack/dlpack.h kb was built with

namespace {

// ---- SHA-256 ------------------------------------------------------------------

constexpr std::array<std::uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void sha256_block(std::array<std::uint32_t, 8>& h, const unsigned char* p) {
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) | (std::uint32_t{p[4 * i + 2]} << 8) |
           std::uint32_t{p[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; ++i) {
    std::uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    std::uint32_t ch = (e & f) ^ (~e & g);
    std::uint32_t t1 = hh + S1 + ch + kK[static_cast<std::size_t>(i)] + w[i];
    std::uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    std::uint32_t t2 = S0 + maj;
    hh = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

// ---- files and processes ----------------------------------------------------------

bool write_file(const std::string& path, std::string_view content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return false;
  f.write(content.data(), static_cast<std::streamsize>(content.size()));
  return static_cast<bool>(f.flush());
}

// A build log as kept in memory and in reports: at most the first and the last
// kMaxLogKeep bytes of the file, with what was cut counted between them (a
// compiler may write up to the output limit).
constexpr std::size_t kMaxLogKeep = 256 * 1024;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  auto end = f.tellg();
  std::size_t size = end > 0 ? static_cast<std::size_t>(end) : 0;
  auto read_at = [&](std::size_t off, std::size_t n) {
    std::string out(n, '\0');
    f.seekg(static_cast<std::streamoff>(off));
    f.read(out.data(), static_cast<std::streamsize>(n));
    out.resize(static_cast<std::size_t>(f.gcount()));
    return out;
  };
  if (size <= 2 * kMaxLogKeep) return read_at(0, size);
  std::string head = read_at(0, kMaxLogKeep);
  f.clear();
  std::string tail = read_at(size - kMaxLogKeep, kMaxLogKeep);
  return head + fmt::format("\n[kb: {} bytes of the log left out]\n", size - 2 * kMaxLogKeep) + tail;
}

bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}

bool make_dirs(const std::string& path) {
  std::string cur;
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    cur = path.substr(0, j);
    if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    i = j + 1;
  }
  return true;
}

void remove_tree(const std::string& path) {
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      std::string p = path + "/" + n;
      struct stat st{};
      if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(p);
      else ::unlink(p.c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

bool safe_relative(const std::string& p) {
  if (p.empty() || p[0] == '/') return false;
  std::size_t i = 0;
  while (i <= p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    std::string part = p.substr(i, j - i);
    if (part.empty() || part == "." || part == "..") return false;
    i = j + 1;
  }
  return true;
}

struct Run {
  bool started = false;
  bool timed_out = false;
  int status = 0;
};

void set_limit(int resource, rlim_t value) {
  struct rlimit r{value, value};
  ::setrlimit(resource, &r);
}

// Runs argv (PATH lookup) in `cwd` with stdout and stderr appended to `log`,
// in its own process group under `limits`. The group is killed past the wall
// limit, and after the compiler exits (nothing it started outlives the build).
Run run_logged(const std::vector<std::string>& argv, const std::string& log, const std::string& cwd,
               const BuildLimits& limits) {
  // limits.memory_bytes is resolved (non-zero) by build_solution.
  Run r;
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return r;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto cpu = static_cast<rlim_t>(limits.cpu_seconds > 1 ? limits.cpu_seconds : 1);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // the compiler and its children: one group to kill
    set_limit(RLIMIT_AS, static_cast<rlim_t>(limits.memory_bytes));
    set_limit(RLIMIT_CPU, cpu);
    set_limit(RLIMIT_FSIZE, static_cast<rlim_t>(limits.output_bytes));
    set_limit(RLIMIT_CORE, 0);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execvp(args[0], args.data());
    const char* msg = "kb: cannot execute the compiler\n";
    ssize_t ignored = ::write(2, msg, std::strlen(msg));
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before any kill below
  ::close(fd);
  r.started = true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limits.wall_seconds);
  while (true) {
    pid_t w = ::waitpid(pid, &r.status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &r.status, 0);
      r.timed_out = true;
      break;
    }
    ::usleep(20000);
  }
  ::kill(-pid, SIGKILL);
  return r;
}

std::string human_bytes(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} bytes", b);
}

std::string limits_text(const BuildLimits& l) {
  return fmt::format("{} s wall, {} s CPU and {} of address space per compiler process, {} per file written",
                     l.wall_seconds, l.cpu_seconds, human_bytes(l.memory_bytes), human_bytes(l.output_bytes));
}

// Why a compiler run that ended by a signal ended, in words.
std::string signal_reason(int sig, const BuildLimits& l) {
  if (sig == SIGXCPU) return fmt::format("it used more than {} s of CPU (the build's limit)", l.cpu_seconds);
  if (sig == SIGXFSZ) return fmt::format("it wrote a file larger than {} (the build's limit)", human_bytes(l.output_bytes));
  if (sig == SIGKILL) return "it was killed (SIGKILL: the machine's memory, or the build's limits)";
  return fmt::format("signal {} ({})", sig, strsignal(sig));
}

// Include-like directives and what they name; see refused_include().
bool escapes(std::string_view target, int depth) {
  if (!target.empty() && target[0] == '/') return true;
  std::size_t i = 0;
  while (i <= target.size()) {
    std::size_t j = target.find('/', i);
    if (j == std::string_view::npos) j = target.size();
    std::string_view part = target.substr(i, j - i);
    if (part == "..") {
      if (--depth < 0) return true;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
    i = j + 1;
  }
  return false;
}

std::string c_string_literal(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\{:03o}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool is_c_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

bool compiled_source(const std::string& path, bool cuda) {
  auto ends = [&](std::string_view ext) {
    return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".cpp") || ends(".cc") || ends(".cxx") || ends(".c")) return true;
  return cuda && ends(".cu");
}

std::vector<std::string> compiler_command(bool cuda) {
  if (cuda) {
    const char* env = std::getenv("NVCC");
    std::string nvcc = env && *env ? env : KB_PLUGIN_NVCC;
    return {nvcc, "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC,-fvisibility=hidden", "-arch=" KB_PLUGIN_GPU_ARCH};
  }
  const char* env = std::getenv("CXX");
  std::string cxx = env && *env ? env : "c++";
  return {cxx, "-std=c++20", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,-z,defs"};
}

}  // namespace

std::string refused_include(const std::string& path, std::string_view content) {
  int file_depth = 0;  // directories between src/ and the file
  for (char c : path) file_depth += c == '/';
  std::size_t line_no = 0, pos = 0;
  auto refuse = [&](std::string_view what, std::string_view target) {
    std::string shown(target.substr(0, 200));
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return fmt::format("src/{}:{}: {} \"{}\" names a path outside the solution; a solution includes its own files "
                       "(relative paths inside it) and the system's headers only",
                       path, line_no, what, shown);
  };
  while (pos <= content.size()) {
    ++line_no;
    std::size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    std::size_t i = line.find_first_not_of(" \t");
    if (i != std::string_view::npos && line[i] == '#') {
      i = line.find_first_not_of(" \t", i + 1);
      if (i != std::string_view::npos) {
        std::size_t w = i;
        while (w < line.size() && (std::isalnum(static_cast<unsigned char>(line[w])) || line[w] == '_')) ++w;
        std::string_view word = line.substr(i, w - i);
        if (word == "include" || word == "include_next" || word == "import" || word == "embed") {
          std::size_t q = line.find_first_not_of(" \t", w);
          if (q != std::string_view::npos && (line[q] == '"' || line[q] == '<')) {
            char close = line[q] == '"' ? '"' : '>';
            std::size_t e = line.find(close, q + 1);
            std::string_view target = line.substr(q + 1, (e == std::string_view::npos ? line.size() : e) - q - 1);
            if (escapes(target, close == '"' ? file_depth : 0)) return refuse(fmt::format("#{}", word), target);
          }
        }
      }
    }
    for (std::size_t k = line.find(".incbin"); k != std::string_view::npos; k = line.find(".incbin", k + 1)) {
      std::size_t q = line.find_first_of("\"'", k + 7);
      if (q == std::string_view::npos) continue;
      std::size_t skip = q + 1;  // in a C string the quotes are \" : the name ends at the next quote or backslash
      std::size_t e = line.find_first_of("\"'\\", skip);
      std::string_view target = line.substr(skip, (e == std::string_view::npos ? line.size() : e) - skip);
      if (escapes(target, 0)) return refuse(".incbin", target);
    }
    if (end == content.size()) break;
  }
  return {};
}

std::string sha256_hex(std::string_view data) {
  std::array<std::uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::size_t n = data.size();
  std::size_t full = n / 64 * 64;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  for (std::size_t i = 0; i < full; i += 64) sha256_block(h, p + i);
  unsigned char tail[128] = {0};
  std::size_t rest = n - full;
  std::memcpy(tail, p + full, rest);
  tail[rest] = 0x80;
  std::size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  std::uint64_t bits = static_cast<std::uint64_t>(n) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - static_cast<std::size_t>(i)] = static_cast<unsigned char>(bits >> (8 * i));
  for (std::size_t i = 0; i < tail_len; i += 64) sha256_block(h, tail + i);
  std::string out;
  for (auto v : h) out += fmt::format("{:08x}", v);
  return out;
}

std::string generate_entry_source(const Solution& s, const Definition& d) {
  const std::string& ep = s.spec.entry_point;
  std::size_t sep = ep.rfind("::");
  std::string file = sep == std::string::npos ? ep : ep.substr(0, sep);
  std::string symbol = sep == std::string::npos ? "" : ep.substr(sep + 2);
  bool cuda = s.spec.language == "cuda";
  std::size_t n_in = d.inputs.size(), n_out = d.outputs.size(), n = n_in + n_out;

  std::string params;
  for (std::size_t i = 0; i < n; ++i)
    params += (i ? ", " : "") + (i < n_in ? d.inputs[i].name : d.outputs[i - n_in].name);

  std::string o;
  o += fmt::format("// Generated by kb for solution {} ({}): the kb plugin entry point.\n", s.name, d.name);
  o += "#include <kb/kb.h>\n#include <cstddef>\n#include <cstdint>\n#include <cstdio>\n#include <tuple>\n"
       "#include <type_traits>\n#include <utility>\n";
  o += fmt::format("#include {}\n\n", c_string_literal(file));
  o += R"(namespace kb_generated {
template <class F> struct Sig;
template <class R, class... A> struct Sig<R (*)(A...)> {
  using Ret = R;
  using Args = std::tuple<A...>;
  static constexpr std::size_t n = sizeof...(A);
};
template <class R, class... A> struct Sig<R (*)(A...) noexcept> : Sig<R (*)(A...)> {};
template <class P> constexpr bool is_tensor = std::is_same_v<P, DLTensor*> || std::is_same_v<P, const DLTensor*>;
template <class S, std::size_t I> constexpr bool tensor_at() {
  if constexpr (I < S::n) return is_tensor<std::tuple_element_t<I, typename S::Args>>; else return true;
}
template <class S, std::size_t I> constexpr bool scalar_at() {
  if constexpr (I < S::n) return std::is_arithmetic_v<std::tuple_element_t<I, typename S::Args>>; else return true;
}
template <class S, std::size_t I> constexpr bool stream_at() {
  if constexpr (I < S::n) {
    using P = std::tuple_element_t<I, typename S::Args>;
    return std::is_pointer_v<P> && !is_tensor<P>;
  } else return true;
}
template <class P> P get(const kb_plugin_call* c, std::size_t i) {
  if constexpr (is_tensor<P>) {
    const DLTensor* t = i < c->n_inputs ? c->inputs[i].tensor : &c->outputs[i - c->n_inputs];
    return const_cast<P>(t);
  } else if constexpr (std::is_arithmetic_v<P>) {
    const kb_plugin_arg& a = c->inputs[i];
    if (a.kind == KB_ARG_FLOAT) return static_cast<P>(a.float_value);
    return static_cast<P>(a.int_value);
  } else {
    return reinterpret_cast<P>(c->stream);
  }
}
)";
  o += fmt::format("using S = Sig<decltype(&{})>;\n", symbol);
  std::string count_msg = fmt::format(
      "kb: entry point {} must take {} parameters ({}) in the order of definition {}{}", symbol, n, params, d.name,
      cuda ? ", optionally followed by a cudaStream_t" : "");
  o += fmt::format("static_assert(S::n == {}{}, {});\n", n, cuda ? fmt::format(" || S::n == {}", n + 1) : "",
                   c_string_literal(count_msg));
  o += "static_assert(std::is_void_v<S::Ret> || std::is_integral_v<S::Ret>, "
       "\"kb: the entry point must return void or int (0 = success)\");\n";
  for (std::size_t i = 0; i < n; ++i) {
    bool is_input = i < n_in;
    const TensorSpec& t = is_input ? d.inputs[i] : d.outputs[i - n_in];
    if (t.is_scalar()) {
      o += fmt::format("static_assert(scalar_at<S, {}>(), {});\n", i,
                       c_string_literal(fmt::format("kb: parameter {} of {} (input {}, a Python scalar) must be an "
                                                    "arithmetic type (int64_t, int, double, float or bool)",
                                                    i + 1, symbol, t.name)));
    } else {
      o += fmt::format("static_assert(tensor_at<S, {}>(), {});\n", i,
                       c_string_literal(fmt::format("kb: parameter {} of {} ({} {}) must be DLTensor* or const DLTensor*",
                                                    i + 1, symbol, is_input ? "input" : "output", t.name)));
    }
  }
  if (cuda)
    o += fmt::format("static_assert(stream_at<S, {}>(), {});\n", n,
                     c_string_literal(fmt::format("kb: parameter {} of {}, after the definition's, must be the "
                                                  "cudaStream_t (a pointer)", n + 1, symbol)));
  o += fmt::format(R"(
template <std::size_t... I> int invoke(const kb_plugin_call* c, std::index_sequence<I...>) {{
  if constexpr (std::is_void_v<S::Ret>) {{
    {0}(get<std::tuple_element_t<I, S::Args>>(c, I)...);
    return 0;
  }} else {{
    return static_cast<int>({0}(get<std::tuple_element_t<I, S::Args>>(c, I)...));
  }}
}}

kb_plugin_status run(const kb_plugin_call* c) {{
  if (c->n_inputs != {1} || c->n_outputs != {2}) {{
    std::snprintf(c->message, c->message_size, "called with %zu inputs and %zu outputs, expected {1} and {2}",
                  c->n_inputs, c->n_outputs);
    return KB_PLUGIN_ERROR;
  }}
  int rc = invoke(c, std::make_index_sequence<S::n>{{}});
  if (rc != 0) {{
    std::snprintf(c->message, c->message_size, "{0} returned %d", rc);
    return KB_PLUGIN_ERROR;
  }}
  return KB_PLUGIN_OK;
}}

const kb_plugin_solution solutions[1] = {{{{sizeof(kb_plugin_solution), {3}, {4}, {5}, {6}, {7}, &run, nullptr}}}};
const kb_plugin_table table = {{sizeof(kb_plugin_table), KB_PLUGIN_ABI_VERSION, 1, solutions}};
}}  // namespace kb_generated

extern "C" KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t) {{ return &kb_generated::table; }}
)",
                   symbol, n_in, n_out, c_string_literal(s.definition), c_string_literal(s.name),
                   c_string_literal(s.author),
                   s.description ? c_string_literal(s.description->substr(0, 400)) : std::string("nullptr"),
                   cuda ? "KB_PLUGIN_DEVICE_CUDA" : "KB_PLUGIN_DEVICE_CPU");
  return o;
}

Result<BuildResult> build_solution(const Solution& s, const Definition& d, const BuildOptions& options) {
  bool cuda = s.spec.language == "cuda";
  if (!cuda && s.spec.language != "cpp")
    return make_error(Code::unsupported, fmt::format("solution {}: kb cannot build language {}", s.name, s.spec.language));
  if (cuda && !KB_PLUGIN_HAVE_CUDA)
    return make_error(Code::unsupported,
                      fmt::format("solution {}: a cuda solution needs a kb built with CUDA (nvcc and a CUDA kb-worker)", s.name));
  if (options.cache_dir.empty()) return make_error(Code::invalid_argument, "build_solution: no cache directory");
  std::vector<std::string> cmd = compiler_command(cuda);
  BuildLimits limits = options.limits;
  if (limits.memory_bytes == 0) {
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    std::uint64_t half = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2 : 0;
    limits.memory_bytes = half > 0 && half < (8ull << 30) ? half : (8ull << 30);
  }

  std::string key_text = fmt::format("kb solution build 1\nkb {}\nplugin abi {}\n", KB_PLUGIN_KB_VERSION,
                                     KB_PLUGIN_ABI_VERSION_NUMBER);
  for (const auto& a : cmd) key_text += a + "\n";
  // A build that failed at the memory or output limit is cached as failed; it
  // is tried again under other limits.
  key_text += fmt::format("limits {} {}\n", limits.memory_bytes, limits.output_bytes);
  key_text += to_json(d, false) + "\n" + to_json(s, false);
  std::string key = sha256_hex(key_text);
  std::string root = options.cache_dir + "/solutions";
  std::string final_dir = root + "/" + key;
  std::string lib = final_dir + "/libsolution.so";
  auto reuse = [&]() -> std::optional<BuildResult> {
    if (exists(lib)) {
      BuildResult r;
      r.library = lib;
      r.log = read_file(final_dir + "/build.log");
      r.cached = true;
      r.note = fmt::format("build: reused {}", final_dir);
      return r;
    }
    if (exists(final_dir + "/FAILED")) {
      BuildResult r;
      r.log = read_file(final_dir + "/build.log");
      r.cached = true;
      r.note = fmt::format("build: the compiler failed (cached in {})", final_dir);
      return r;
    }
    return std::nullopt;
  };
  if (auto r = reuse()) return *r;
  if (!make_dirs(root))
    return make_error(Code::io_error, fmt::format("{}: cannot create: {}", root, std::strerror(errno)));

  // One builder per key at a time; the others wait here and then reuse.
  std::string lock_path = final_dir + ".lock";
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return make_error(Code::io_error, fmt::format("{}: cannot open: {}", lock_path, std::strerror(errno)));
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // releases the flock
  } unlock{lock};
  if (auto r = reuse()) return *r;

  std::string tmpl = final_dir + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    return make_error(Code::io_error, fmt::format("{}: cannot create a build directory: {}", root, std::strerror(errno)));
  std::string tmp = buf.data();
  struct Cleanup {
    std::string dir;
    bool keep = false;
    ~Cleanup() {
      if (!keep) remove_tree(dir);
    }
  } cleanup{tmp};

  auto io_fail = [&](const std::string& what) {
    return make_error(Code::io_error, fmt::format("{}: cannot write {}: {}", tmp, what, std::strerror(errno)));
  };
  if (!make_dirs(tmp + "/include/kb") || !make_dirs(tmp + "/include/dlpack") || !make_dirs(tmp + "/src"))
    return io_fail("directories");
  if (!write_file(tmp + "/include/kb/kb.h", embedded_kb_h)) return io_fail("include/kb/kb.h");
  if (!write_file(tmp + "/include/dlpack/dlpack.h", embedded_dlpack_h)) return io_fail("include/dlpack/dlpack.h");

  std::string log_path = tmp + "/build.log";
  std::string entry_file, symbol;
  if (auto sep = s.spec.entry_point.rfind("::"); sep != std::string::npos) {
    entry_file = s.spec.entry_point.substr(0, sep);
    symbol = s.spec.entry_point.substr(sep + 2);
  }
  auto compile_failure = [&](const std::string& why, bool cacheable) -> Result<BuildResult> {
    std::string log = read_file(log_path) + why + "\n";
    BuildResult r;
    r.log = log;
    if (cacheable) {
      write_file(log_path, log);
      write_file(tmp + "/FAILED", why + "\n");
      if (::rename(tmp.c_str(), final_dir.c_str()) == 0) {
        cleanup.keep = true;
        r.note = fmt::format("build: the compiler failed (kept in {})", final_dir);
        return r;
      }
    }
    r.note = "build: failed";
    return r;
  };
  std::vector<std::string> compiled;
  for (const auto& f : s.sources) {
    if (!safe_relative(f.path)) return compile_failure(fmt::format("source path \"{}\" is not a safe relative path", f.path), true);
    if (auto why = refused_include(f.path, f.content); !why.empty()) return compile_failure("kb: " + why, true);
    std::string p = tmp + "/src/" + f.path;
    std::size_t slash = p.rfind('/');
    if (!make_dirs(p.substr(0, slash))) return io_fail(f.path);
    if (!write_file(p, f.content)) return io_fail(f.path);
    if (f.path != entry_file && compiled_source(f.path, cuda)) compiled.push_back("src/" + f.path);
  }
  if (!is_c_identifier(symbol))
    return compile_failure(fmt::format("entry point \"{}\": \"{}\" is not a C/C++ identifier", s.spec.entry_point, symbol), true);
  std::string entry_name = cuda ? "kb_entry.cu" : "kb_entry.cpp";
  if (!write_file(tmp + "/" + entry_name, generate_entry_source(s, d))) return io_fail(entry_name);

  std::vector<std::string> argv = cmd;
  for (const char* x : {"-I", "include", "-I", "src"}) argv.push_back(x);
  argv.push_back(entry_name);
  for (auto& c : compiled) argv.push_back(c);
  argv.push_back("-o");
  argv.push_back("libsolution.so");
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  write_file(log_path, "$ " + line + "\n# limits: " + limits_text(limits) + "\n");
  auto t0 = std::chrono::steady_clock::now();
  Run r = run_logged(argv, log_path, tmp, limits);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.started) return compile_failure("kb: could not start the compiler", false);
  if (r.timed_out)
    return compile_failure(
        fmt::format("kb: the build ran longer than {} s (the build's limit) and was killed", limits.wall_seconds),
        false);
  if (WIFSIGNALED(r.status))
    return compile_failure(fmt::format("kb: the compiler failed: {}", signal_reason(WTERMSIG(r.status), limits)),
                           false);
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127)
    return compile_failure(fmt::format("kb: compiler {} not found (set {})", cmd[0], cuda ? "NVCC" : "CXX"), false);
  if (WEXITSTATUS(r.status) != 0) {
    std::string out = read_file(log_path);
    std::string hint;
    if (out.find("out of memory") != std::string::npos || out.find("std::bad_alloc") != std::string::npos)
      hint = fmt::format(": out of memory under the build's limit of {} of address space", human_bytes(limits.memory_bytes));
    else if (out.find("File size limit exceeded") != std::string::npos)
      hint = fmt::format(": a file outgrew the build's limit of {}", human_bytes(limits.output_bytes));
    return compile_failure(fmt::format("kb: the compiler failed (exit status {}){}", WEXITSTATUS(r.status), hint), true);
  }
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    // Another process finished first (a build without our lock): use its result.
    if (auto again = reuse()) return *again;
    return make_error(Code::io_error, fmt::format("{}: cannot move the build into place: {}", final_dir, std::strerror(errno)));
  }
  cleanup.keep = true;
  BuildResult out;
  out.library = lib;
  out.log = read_file(final_dir + "/build.log");
  out.note = fmt::format("build: compiled in {:.1f} s into {}", secs, final_dir);
  return out;
}

}  // namespace kb::plugin
