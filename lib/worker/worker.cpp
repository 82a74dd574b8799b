#include "worker/worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/tuning.hpp"
#include "worker/protocol.hpp"
#include "worker/worker_paths.h"

extern char** environ;

namespace kb::worker {

namespace {

using Clock = std::chrono::steady_clock;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

bool is_executable(const std::string& p) {
  struct stat st{};
  return !p.empty() && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

bool write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

std::uint8_t guard_byte(std::size_t arg, std::size_t i) {
  return static_cast<std::uint8_t>(0xA5u ^ (arg * 29u + i * 7u));
}

bool guards_intact(const std::byte* data, std::size_t nbytes, std::size_t arg) {
  const auto* before = reinterpret_cast<const std::uint8_t*>(data) - kGuardBytes;
  const auto* after = reinterpret_cast<const std::uint8_t*>(data) + nbytes;
  for (std::size_t i = 0; i < kGuardBytes; ++i)
    if (before[i] != guard_byte(arg, i) || after[i] != guard_byte(arg, i + kGuardBytes)) return false;
  return true;
}

void write_guards(std::byte* data, std::size_t nbytes, std::size_t arg) {
  auto* before = reinterpret_cast<std::uint8_t*>(data) - kGuardBytes;
  auto* after = reinterpret_cast<std::uint8_t*>(data) + nbytes;
  for (std::size_t i = 0; i < kGuardBytes; ++i) {
    before[i] = guard_byte(arg, i);
    after[i] = guard_byte(arg, i + kGuardBytes);
  }
}

std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

// DLPack type of a kb dtype (as kb_dtype_to_dlpack).
void dlpack_type(DType t, ArgDesc& a) {
  a.lanes = 1;
  switch (t) {
    case DType::float32: a.code = 2; a.bits = 32; break;
    case DType::float16: a.code = 2; a.bits = 16; break;
    case DType::bfloat16: a.code = 4; a.bits = 16; break;
    case DType::float8_e4m3fn: a.code = 10; a.bits = 8; break;
    case DType::float8_e5m2: a.code = 12; a.bits = 8; break;
    case DType::float4_e2m1: a.code = 17; a.bits = 4; a.lanes = 2; break;
    case DType::int64: a.code = 0; a.bits = 64; break;
    case DType::int32: a.code = 0; a.bits = 32; break;
    case DType::int16: a.code = 0; a.bits = 16; break;
    case DType::int8: a.code = 0; a.bits = 8; break;
    case DType::bool_: a.code = 6; a.bits = 8; break;
  }
}

// A tensor argument's descriptor (layout at `offset` in shared memory).
bool describe_arg(ArgDesc& a, std::size_t offset, DType dtype, const std::vector<std::int64_t>& shape,
                  std::size_t nbytes) {
  if (shape.size() > kMaxRank) return false;
  a.kind = kArgTensor;
  dlpack_type(dtype, a);
  a.ndim = static_cast<std::int32_t>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) a.shape[d] = shape[d];
  if (dtype == DType::float4_e2m1) {  // two values a byte, as torch's float4_e2m1fn_x2
    if (!shape.empty() && shape.back() % 2 == 0) a.shape[shape.size() - 1] /= 2;
    else a.lanes = 1;
  }
  a.offset = offset;
  a.nbytes = nbytes;
  return true;
}

// A scalar argument's descriptor (an absent scalar is the integer 0).
void describe_scalar(ArgDesc& a, const InArg& in) {
  const ScalarValue& v = in.scalar ? *in.scalar : ScalarValue{std::int64_t{0}};
  if (auto* x = std::get_if<std::int64_t>(&v)) {
    a.kind = kArgInt;
    a.int_value = *x;
  } else if (auto* f = std::get_if<double>(&v)) {
    a.kind = kArgFloat;
    a.float_value = *f;
  } else {
    a.kind = kArgBool;
    a.int_value = std::get<bool>(v) ? 1 : 0;
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

std::string signal_description(int sig) {
  const char* name = nullptr;
  switch (sig) {
    case SIGSEGV: name = "SIGSEGV"; break;
    case SIGABRT: name = "SIGABRT"; break;
    case SIGBUS: name = "SIGBUS"; break;
    case SIGFPE: name = "SIGFPE"; break;
    case SIGILL: name = "SIGILL"; break;
    case SIGKILL: name = "SIGKILL"; break;
    case SIGTERM: name = "SIGTERM"; break;
    case SIGTRAP: name = "SIGTRAP"; break;
    case SIGSYS: name = "SIGSYS"; break;
    case SIGXCPU: name = "SIGXCPU"; break;
    case SIGXFSZ: name = "SIGXFSZ"; break;
    case SIGPIPE: name = "SIGPIPE"; break;
    case SIGINT: name = "SIGINT"; break;
    case SIGQUIT: name = "SIGQUIT"; break;
    default: break;
  }
  const char* what = ::strsignal(sig);
  std::string w = what ? what : "unknown signal";
  if (!w.empty()) w[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(w[0])));
  return name ? fmt::format("{} ({})", name, w) : fmt::format("signal {} ({})", sig, w);
}

Result<std::string> find_worker_executable(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (is_executable(explicit_path)) return explicit_path;
    return make_error(Code::io_error, fmt::format("worker executable {} does not exist or is not executable", explicit_path));
  }
  if (const std::string& chosen = tuning::current().worker; !chosen.empty()) {
    if (is_executable(chosen)) return chosen;
    return make_error(Code::io_error,
                      fmt::format("tuning worker (KB_WORKER) {} does not exist or is not executable", chosen));
  }
  for (const char* p : {KB_WORKER_BUILD_PATH, KB_WORKER_INSTALL_PATH})
    if (is_executable(p)) return std::string(p);
  return make_error(Code::io_error, fmt::format("kb-worker not found (looked at {} and {}); set KB_WORKER to its path",
                                                KB_WORKER_BUILD_PATH, KB_WORKER_INSTALL_PATH));
}

Result<std::unique_ptr<Worker>> Worker::start(const std::string& plugin_path, const Options& options) {
  std::unique_ptr<Worker> w(new Worker());
  w->plugin_path_ = plugin_path;
  w->options_ = options;
  if (w->options_.timeout_s <= 0) w->options_.timeout_s = 30;
  struct stat st{};
  if (::stat(plugin_path.c_str(), &st) != 0)
    return make_error(Code::io_error, fmt::format("{}: cannot open: {}", plugin_path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return make_error(Code::io_error, fmt::format("{}: not a regular file", plugin_path));
  auto exe = find_worker_executable(options.worker_path);
  if (!exe) return make_error(Code::io_error, fmt::format("{}: {}", plugin_path, exe.error().message));
  w->executable_ = *exe;
  KB_TRY(w->spawn_and_load());
  return w;
}

Worker::~Worker() {
  if (pid_ > 0) {
    close_fd(control_);  // the worker sees EOF and exits
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, &exit_status_, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      ::usleep(10000);
    }
    if (pid_ > 0) kill_worker();
  }
  close_fd(control_);
  close_fd(output_);
  if (shm_) ::munmap(shm_, shm_size_);
  close_fd(shm_fd_);
}

void Worker::kill_worker() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &exit_status_, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  drain_output(false);
  close_fd(control_);
  close_fd(output_);
}

void Worker::drain_output(bool block_until_eof) {
  if (output_ < 0) return;
  char buf[4096];
  double deadline = now_s() + 1.0;
  while (true) {
    ssize_t r = ::read(output_, buf, sizeof buf);
    if (r > 0) {
      std::size_t n = static_cast<std::size_t>(r);
      std::size_t room = captured_.size() < options_.max_output_bytes ? options_.max_output_bytes - captured_.size() : 0;
      captured_.append(buf, std::min(room, n));
      dropped_ += n - std::min(room, n);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN && block_until_eof && now_s() < deadline) {
      pollfd p{output_, POLLIN, 0};
      ::poll(&p, 1, 50);
      continue;
    }
    break;  // EOF, nothing more now, or an error
  }
}

std::string Worker::take_output() {
  drain_output(false);
  std::string out = std::move(captured_);
  if (dropped_) out += fmt::format("\n... ({} more bytes of output not kept)\n", dropped_);
  captured_.clear();
  dropped_ = 0;
  return out;
}

Worker::Wait Worker::receive(void* p, std::size_t n, double deadline) {
  char* c = static_cast<char*>(p);
  while (n) {
    double left = deadline - now_s();
    if (left <= 0) return Wait::timeout;
    pollfd fds[2] = {{control_, POLLIN, 0}, {output_, POLLIN, 0}};
    int nfds = output_ >= 0 ? 2 : 1;
    int r = ::poll(fds, static_cast<nfds_t>(nfds), static_cast<int>(std::min(left * 1000.0 + 1, 1000.0)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Wait::eof;
    if (nfds == 2 && (fds[1].revents & (POLLIN | POLLHUP))) {
      drain_output(false);
      if (fds[1].revents & POLLHUP && !(fds[1].revents & POLLIN)) close_fd(output_);
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t got = ::read(control_, c, n);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return Wait::eof;
      c += got;
      n -= static_cast<std::size_t>(got);
    }
  }
  return Wait::ok;
}

std::string Worker::describe_exit() {
  if (pid_ > 0) {
    // The socket closed: the process is ending. Give it a moment, then make sure.
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      if (::waitpid(pid_, &exit_status_, WNOHANG) == pid_) gone = true;
      else ::usleep(5000);
    }
    if (gone) pid_ = -1;
    else kill_worker();
  }
  drain_output(false);
  close_fd(control_);
  close_fd(output_);
  pid_ = -1;
  int st = exit_status_;
  if (WIFSIGNALED(st)) return fmt::format("killed by {}", signal_description(WTERMSIG(st)));
  if (WIFEXITED(st)) {
    if (WEXITSTATUS(st) == 127) return fmt::format("could not execute {} (exit status 127)", executable_);
    return fmt::format("exited with status {}", WEXITSTATUS(st));
  }
  return "ended";
}

bool Worker::ensure_shm(std::size_t size) {
  if (size <= shm_size_) return true;
  std::size_t want = align_up(std::max(size, shm_size_ * 2), 1 << 16);
  if (::ftruncate(shm_fd_, static_cast<off_t>(want)) != 0) return false;
  if (shm_) ::munmap(shm_, shm_size_);
  shm_ = nullptr;
  shm_size_ = 0;
  void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd_, 0);
  if (p == MAP_FAILED) return false;
  shm_ = p;
  shm_size_ = want;
  return true;
}

Status Worker::ensure_running() {
  if (pid_ >= 0) return ok_status();
  captured_ += "[kb] starting a new worker process\n";
  if (auto st = spawn_and_load(); !st.ok()) return make_error(st.error().code, "cannot restart the worker: " + st.error().message);
  return ok_status();
}

Status Worker::spawn_and_load() {
  if (shm_fd_ < 0) {
    shm_fd_ = static_cast<int>(::syscall(SYS_memfd_create, "kb-worker-io", 1u /* MFD_CLOEXEC */));
    if (shm_fd_ < 0)
      return make_error(Code::io_error, fmt::format("{}: memfd_create: {}", plugin_path_, std::strerror(errno)));
  }
  int sv[2], pipefd[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return make_error(Code::io_error, fmt::format("{}: socketpair: {}", plugin_path_, std::strerror(errno)));
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return make_error(Code::io_error, fmt::format("{}: pipe: {}", plugin_path_, std::strerror(errno)));
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls.
  std::vector<std::string> env_strings;
  bool have_asan = false;
  for (char** e = environ; e && *e; ++e) {
    std::string s = *e;
    if (s.rfind("ASAN_OPTIONS=", 0) == 0) {
      have_asan = true;
      s += ":";
    } else {
      env_strings.push_back(std::move(s));
      continue;
    }
    // Under a sanitizer build, let the solution's signals kill the worker
    // with their own name instead of an ASan report and exit status 1.
    s += "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:handle_sigill=0:detect_leaks=0";
    env_strings.push_back(std::move(s));
  }
  if (!have_asan)
    env_strings.push_back("ASAN_OPTIONS=handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:handle_sigill=0:detect_leaks=0");
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = "kb-worker";
  std::string arg1 = plugin_path_;
  std::string arg2 = std::to_string(options_.cuda_device);  // the CUDA device to use; -1: the default
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  const char* exe = executable_.c_str();
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    if (devnull >= 0) ::close(devnull);
    return make_error(Code::io_error, fmt::format("{}: fork: {}", plugin_path_, std::strerror(err)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    struct rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    // Move the fds out of the way first, so the dup2s below never collide.
    int ctl = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 64);
    int shm = ::fcntl(shm_fd_, F_DUPFD_CLOEXEC, 64);
    int out = ::fcntl(pipefd[1], F_DUPFD_CLOEXEC, 64);
    if (ctl < 0 || shm < 0 || out < 0) ::_exit(125);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (::dup2(out, 1) < 0 || ::dup2(out, 2) < 0 || ::dup2(ctl, kControlFd) < 0 || ::dup2(shm, kShmFd) < 0)
      ::_exit(125);
    ::execve(exe, argv, envp.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  ::close(pipefd[1]);
  if (devnull >= 0) ::close(devnull);
  pid_ = pid;
  control_ = sv[0];
  output_ = pipefd[0];
  ::fcntl(output_, F_SETFL, ::fcntl(output_, F_GETFL) | O_NONBLOCK);
  ++starts_;

  LoadReply reply{};
  double load_limit = options_.load_timeout_s > 0 ? options_.load_timeout_s : std::max(options_.timeout_s, 10.0);
  double deadline = now_s() + load_limit;
  Wait w = receive(&reply, sizeof reply, deadline);
  if (w == Wait::timeout) {
    kill_worker();
    return make_error(Code::invalid_data, fmt::format("{}: loading took longer than {} s; the worker was killed",
                                                      plugin_path_, load_limit));
  }
  if (w == Wait::eof) {
    std::string how = describe_exit();
    std::string out = take_output();
    return make_error(Code::invalid_data, fmt::format("{}: the worker {} while loading the plugin{}{}", plugin_path_, how,
                                                      out.empty() ? "" : "; its output: ", out));
  }
  if (reply.magic != kMagic || reply.protocol != kProtocolVersion) {
    kill_worker();
    return make_error(Code::invalid_data, fmt::format("{}: the worker answered with a malformed message", plugin_path_));
  }
  reply.message[sizeof reply.message - 1] = '\0';
  if (reply.status != kLoadOk) {
    kill_worker();
    Code code = reply.status == kLoadNotFound      ? Code::not_found
                : reply.status == kLoadAbiMismatch ? Code::abi_mismatch
                                                   : Code::invalid_data;
    return make_error(code, fmt::format("{}: {}", plugin_path_, reply.message));
  }
  if (reply.n_solutions == 0 || reply.n_solutions > kMaxSolutions) {
    kill_worker();
    return make_error(Code::invalid_data, fmt::format("{}: the worker reported {} solutions", plugin_path_, reply.n_solutions));
  }
  std::vector<SolutionDesc> descs(reply.n_solutions);
  w = receive(descs.data(), descs.size() * sizeof(SolutionDesc), deadline);
  if (w != Wait::ok) {
    std::string how = w == Wait::timeout ? "stalled" : describe_exit();
    kill_worker();
    return make_error(Code::invalid_data, fmt::format("{}: the worker {} while sending the table", plugin_path_, how));
  }
  std::vector<SolutionInfo> infos;
  for (auto& d : descs) {
    d.definition[kMaxNameBytes] = d.name[kMaxNameBytes] = d.author[kMaxNameBytes] = '\0';
    d.description[kDescriptionBytes - 1] = '\0';
    SolutionInfo s;
    s.definition = d.definition;
    s.name = d.name;
    s.author = d.author;
    if (d.has_description) s.description = std::string(d.description);
    s.cuda = d.device == 1;
    if (s.definition.empty() || s.name.empty() || s.author.empty()) {
      kill_worker();
      return make_error(Code::invalid_data, fmt::format("{}: the worker sent an empty name", plugin_path_));
    }
    infos.push_back(std::move(s));
  }
  if (!solutions_.empty() && infos != solutions_) {
    kill_worker();
    return make_error(Code::invalid_data,
                      fmt::format("{}: the plugin's table changed between loads of the worker", plugin_path_));
  }
  solutions_ = std::move(infos);
  return ok_status();
}

CallResult Worker::call(std::size_t index, std::span<const InArg> inputs, std::span<const OutArg> outputs,
                        std::span<const std::string> input_names, std::span<const std::string> output_names) {
  auto failed = [](Outcome o, std::string m) { return CallResult{o, std::move(m), 0}; };
  if (index >= solutions_.size()) return failed(Outcome::failed, "no such solution in the plugin");
  if (inputs.size() + outputs.size() > kMaxArgs)
    return failed(Outcome::failed, fmt::format("more than {} arguments", kMaxArgs));
  if (auto st = ensure_running(); !st.ok()) return failed(Outcome::failed, st.error().message);

  // Layout: guard | data | guard for every tensor, data aligned.
  auto req = std::make_unique<RunRequest>();
  req->magic = kMagic;
  req->op = kOpRun;
  req->solution = static_cast<std::uint32_t>(index);
  req->n_inputs = static_cast<std::uint32_t>(inputs.size());
  req->n_outputs = static_cast<std::uint32_t>(outputs.size());
  std::size_t pos = 0;
  std::vector<std::size_t> offsets(inputs.size() + outputs.size(), 0);
  auto place = [&](std::size_t k, std::size_t nbytes) {
    std::size_t data = align_up(pos + kGuardBytes, kAlign);
    offsets[k] = data;
    pos = data + nbytes + kGuardBytes;
  };
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_tensor) place(i, inputs[i].nbytes);
  for (std::size_t i = 0; i < outputs.size(); ++i) place(inputs.size() + i, outputs[i].nbytes);
  if (!ensure_shm(std::max<std::size_t>(pos, 4096)))
    return failed(Outcome::failed, fmt::format("cannot size shared memory to {} bytes: {}", pos, std::strerror(errno)));
  std::byte* base = static_cast<std::byte*>(shm_);
  req->shm_size = shm_size_;

  auto describe_tensor = [&](ArgDesc& a, std::size_t k, DType dtype, const std::vector<std::int64_t>& shape,
                             std::size_t nbytes) -> bool {
    if (shape.size() > kMaxRank) return false;
    a.kind = kArgTensor;
    dlpack_type(dtype, a);
    a.ndim = static_cast<std::int32_t>(shape.size());
    for (std::size_t d = 0; d < shape.size(); ++d) a.shape[d] = shape[d];
    if (dtype == DType::float4_e2m1) {  // two values a byte, as torch's float4_e2m1fn_x2
      if (!shape.empty() && shape.back() % 2 == 0) a.shape[shape.size() - 1] /= 2;
      else a.lanes = 1;
    }
    a.offset = offsets[k];
    a.nbytes = nbytes;
    write_guards(base + offsets[k], nbytes, k);
    return true;
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const InArg& in = inputs[i];
    ArgDesc& a = req->args[i];
    if (!in.is_tensor) {
      describe_scalar(a, in);
      continue;
    }
    if (!describe_tensor(a, i, in.dtype, in.shape, in.nbytes)) return failed(Outcome::failed, "tensor rank over 16");
    if (in.nbytes) std::memcpy(base + offsets[i], in.data, in.nbytes);
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    std::size_t k = inputs.size() + i;
    const OutArg& o = outputs[i];
    if (!describe_tensor(req->args[k], k, o.dtype, o.shape, o.nbytes)) return failed(Outcome::failed, "tensor rank over 16");
    if (o.nbytes) std::memcpy(base + offsets[k], o.data, o.nbytes);  // kb's poison
  }

  const std::string& sname = solutions_[index].name;
  if (!write_all(control_, req.get(), sizeof *req)) {
    std::string how = describe_exit();
    return failed(Outcome::crashed, fmt::format("the worker running {} {}", sname, how));
  }
  RunReply reply{};
  Wait w = receive(&reply, sizeof reply, now_s() + options_.timeout_s);
  if (w == Wait::timeout) {
    pid_t old = pid_;
    kill_worker();
    return failed(Outcome::timed_out, fmt::format("{} ran longer than the {} s limit; the worker (pid {}) was killed and "
                                                  "will be replaced", sname, options_.timeout_s, old));
  }
  if (w == Wait::eof) {
    std::string how = describe_exit();
    return failed(Outcome::crashed, fmt::format("{} crashed the worker: {}", sname, how));
  }
  drain_output(false);
  if (reply.magic != kMagic) {
    kill_worker();
    return failed(Outcome::failed, fmt::format("{}: the worker answered with a malformed message; it was killed", sname));
  }
  reply.message[sizeof reply.message - 1] = '\0';
  std::string msg = reply.message;
  switch (reply.status) {
    case kRunOk: break;
    case kRunWrongShape: return failed(Outcome::wrong_shape, fmt::format("{}: {}", sname, msg));
    case kRunWrongDtype: return failed(Outcome::wrong_dtype, fmt::format("{}: {}", sname, msg));
    case kRunUnsupported: return failed(Outcome::unsupported, fmt::format("{} declined: {}", sname, msg));
    case kRunError: return failed(Outcome::failed, fmt::format("{} returned an error: {}", sname, msg));
    case kRunDeviceFault: {
      describe_exit();  // it exits after a sticky CUDA error
      return failed(Outcome::failed, fmt::format("{}; the worker was replaced", msg));
    }
    default: return failed(Outcome::failed, fmt::format("{}: {}", sname, msg.empty() ? "the worker refused the call" : msg));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_tensor) continue;
    std::string name = i < input_names.size() ? input_names[i] : fmt::format("#{}", i);
    if (!guards_intact(base + offsets[i], inputs[i].nbytes, i))
      return failed(Outcome::failed, fmt::format("wrote outside input \"{}\" (guard bytes changed)", name));
    if (inputs[i].nbytes && std::memcmp(base + offsets[i], inputs[i].data, inputs[i].nbytes) != 0)
      return failed(Outcome::failed, fmt::format("modified input \"{}\"", name));
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    std::size_t k = inputs.size() + i;
    std::string name = i < output_names.size() ? output_names[i] : fmt::format("#{}", i);
    if (!guards_intact(base + offsets[k], outputs[i].nbytes, k))
      return failed(Outcome::failed, fmt::format("wrote outside output \"{}\" (guard bytes changed)", name));
  }
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].nbytes) std::memcpy(outputs[i].data, base + offsets[inputs.size() + i], outputs[i].nbytes);
  return CallResult{Outcome::ok, {}, reply.call_ms};
}

EvaluateResult Worker::evaluate(std::size_t index, std::span<const SetArgs> sets, std::span<const std::string> input_names,
                                std::span<const std::string> output_names, const EvaluateOptions& eo) {
  EvaluateResult r;
  auto fail = [&](Outcome o, std::string m) {
    r.call = CallResult{o, std::move(m), 0};
    return r;
  };
  if (index >= solutions_.size()) return fail(Outcome::failed, "no such solution in the plugin");
  if (sets.empty() || sets.size() > kMaxSets) return fail(Outcome::failed, fmt::format("1 to {} argument sets", kMaxSets));
  const auto& first = sets[0];
  const std::size_t ni = first.inputs.size(), no = first.outputs.size();
  if (ni + no > kMaxArgs) return fail(Outcome::failed, fmt::format("more than {} arguments", kMaxArgs));
  for (const auto& s : sets) {
    bool same = s.inputs.size() == ni && s.outputs.size() == no && (!eo.time || s.timed_outputs.size() == no);
    same = same && (s.timed_inputs.empty() || s.timed_inputs.size() == ni);
    for (std::size_t p = 0; p < 2; ++p)
      for (std::size_t i = 0; same && i < ni; ++i) {
        const InArg& in = s.pass_inputs(p)[i];
        same = in.is_tensor == first.inputs[i].is_tensor && in.shape == first.inputs[i].shape &&
               in.dtype == first.inputs[i].dtype && in.nbytes == first.inputs[i].nbytes &&
               in.scalar == first.inputs[i].scalar;
      }
    for (std::size_t i = 0; same && i < no; ++i)
      same = s.outputs[i].shape == first.outputs[i].shape && s.outputs[i].nbytes == first.outputs[i].nbytes;
    if (!same) return fail(Outcome::failed, "the argument sets differ in layout (kb's fault)");
  }
  if (auto st = ensure_running(); !st.ok()) return fail(Outcome::failed, st.error().message);
  auto req = std::make_unique<RunRequest>();
  req->magic = kMagic;
  req->op = kOpEvaluate;
  req->solution = static_cast<std::uint32_t>(index);
  req->n_inputs = static_cast<std::uint32_t>(ni);
  req->n_outputs = static_cast<std::uint32_t>(no);
  req->n_sets = static_cast<std::uint32_t>(sets.size());
  req->flags = (eo.time ? kFlagTime : 0u) | (eo.stream_check ? kFlagStreamCheck : 0u) |
               (eo.time && eo.cupti ? kFlagCupti : 0u);
  req->timing_warmup = static_cast<std::uint32_t>(std::max(0, eo.timing_warmup));
  req->timing_min_samples = static_cast<std::uint32_t>(std::max(0, eo.timing_min_samples));
  const bool fresh = eo.time && !eo.fresh_inputs.empty();
  if (fresh && (eo.fresh_inputs.size() != ni || eo.kept_calls == 0 || eo.kept_calls > kMaxKept))
    return fail(Outcome::failed, "fresh inputs that do not match the arguments (kb's fault)");
  const std::size_t kept_slots = fresh ? eo.kept_calls : 0;
  if (fresh) {
    req->flags |= kFlagFreshInputs;
    req->fresh_salt = eo.fresh_salt;
    req->kept_slots = static_cast<std::uint32_t>(kept_slots);
  }
  std::size_t pos = 0;
  std::vector<std::size_t> offsets(ni + no, 0);
  auto place = [&](std::size_t k, std::size_t nbytes) {
    std::size_t data = align_up(pos + kGuardBytes, kAlign);
    offsets[k] = data;
    pos = data + nbytes + kGuardBytes;
  };
  for (std::size_t i = 0; i < ni; ++i)
    if (first.inputs[i].is_tensor) place(i, first.inputs[i].nbytes);
  for (std::size_t i = 0; i < no; ++i) place(ni + i, first.outputs[i].nbytes);
  const std::size_t stride = align_up(std::max<std::size_t>(pos, 1), kAlign);
  const std::size_t total = (2 * sets.size() + kept_slots) * stride;
  if (!ensure_shm(std::max<std::size_t>(total, 4096)))
    return fail(Outcome::failed, fmt::format("cannot size shared memory to {} bytes: {}", total, std::strerror(errno)));
  std::byte* base = static_cast<std::byte*>(shm_);
  req->shm_size = shm_size_;
  req->set_stride = stride;
  auto at = [&](std::size_t pass, std::size_t set, std::size_t k) {
    return base + (pass * sets.size() + set) * stride + offsets[k];
  };
  for (std::size_t i = 0; i < ni; ++i) {
    const InArg& in = first.inputs[i];
    ArgDesc& a = req->args[i];
    if (!in.is_tensor) {
      describe_scalar(a, in);
      continue;
    }
    if (!describe_arg(a, offsets[i], in.dtype, in.shape, in.nbytes)) return fail(Outcome::failed, "tensor rank over 16");
    if (fresh && eo.fresh_inputs[i]) {
      const FreshInput& f = *eo.fresh_inputs[i];
      if (static_cast<std::uint64_t>(dtype_storage_bytes(f.dtype, f.numel)) != in.nbytes)
        return fail(Outcome::failed, "a fresh input's size does not match its tensor (kb's fault)");
      a.fresh = 1;
      a.fresh_dtype = static_cast<std::uint32_t>(f.dtype);
      a.fresh_numel = f.numel;
      a.fresh_key = f.key;
    }
  }
  for (std::size_t i = 0; i < no; ++i)
    if (!describe_arg(req->args[ni + i], offsets[ni + i], first.outputs[i].dtype, first.outputs[i].shape,
                      first.outputs[i].nbytes))
      return fail(Outcome::failed, "tensor rank over 16");
  for (std::size_t p = 0; p < 2; ++p)
    for (std::size_t s = 0; s < sets.size(); ++s) {
      for (std::size_t i = 0; i < ni; ++i) {
        if (!first.inputs[i].is_tensor) continue;
        const InArg& in = sets[s].pass_inputs(p)[i];
        write_guards(at(p, s, i), in.nbytes, i);
        if (in.nbytes) std::memcpy(at(p, s, i), in.data, in.nbytes);
      }
      for (std::size_t i = 0; i < no; ++i) {
        write_guards(at(p, s, ni + i), sets[s].outputs[i].nbytes, ni + i);
        if (sets[s].outputs[i].nbytes) std::memset(at(p, s, ni + i), 0xFF, sets[s].outputs[i].nbytes);  // poison
      }
    }

  const std::string& sname = solutions_[index].name;
  if (!write_all(control_, req.get(), sizeof *req)) {
    std::string how = describe_exit();
    return fail(Outcome::crashed, fmt::format("the worker running {} {}", sname, how));
  }
  // One limit per checked call, one for the stream check, and one more plus
  // the timing's own caps (and the first measurement of the ceilings).
  double limit = options_.timeout_s * static_cast<double>(sets.size() + (eo.stream_check ? 1 : 0)) +
                 (eo.time ? options_.timeout_s + 20 : 0) + (eo.time && eo.cupti ? options_.timeout_s : 0);
  auto reply = std::make_unique<RunReply>();
  Wait w = receive(reply.get(), sizeof *reply, now_s() + limit);
  if (w == Wait::timeout) {
    pid_t old = pid_;
    kill_worker();
    return fail(Outcome::timed_out,
                fmt::format("{} ran longer than the limit ({} s a call, {:.0f} s for this request); the worker (pid {}) "
                            "was killed and will be replaced", sname, options_.timeout_s, limit, old));
  }
  if (w == Wait::eof) {
    std::string how = describe_exit();
    return fail(Outcome::crashed, fmt::format("{} crashed the worker: {}", sname, how));
  }
  drain_output(false);
  if (reply->magic != kMagic) {
    kill_worker();
    return fail(Outcome::failed, fmt::format("{}: the worker answered with a malformed message; it was killed", sname));
  }
  reply->message[sizeof reply->message - 1] = '\0';
  reply->detail[sizeof reply->detail - 1] = '\0';
  r.detail = reply->detail;
  r.failed_set = reply->failed_set >= 0 && static_cast<std::size_t>(reply->failed_set) < sets.size() ? reply->failed_set : -1;
  std::string msg = reply->message;
  std::string where = r.failed_set >= 0 ? fmt::format("trial {}: ", r.failed_set) : "";
  switch (reply->status) {
    case kRunOk: break;
    case kRunWrongShape: return fail(Outcome::wrong_shape, fmt::format("{}{}: {}", where, sname, msg));
    case kRunWrongDtype: return fail(Outcome::wrong_dtype, fmt::format("{}{}: {}", where, sname, msg));
    case kRunUnsupported: return fail(Outcome::unsupported, fmt::format("{} declined: {}", sname, msg));
    case kRunError: return fail(Outcome::failed, fmt::format("{}{} returned an error: {}", where, sname, msg));
    case kRunDeviceFault: {
      describe_exit();  // it exits after a CUDA error
      return fail(Outcome::failed, fmt::format("{}; the worker was replaced", msg));
    }
    default: return fail(Outcome::failed, fmt::format("{}: {}", sname, msg.empty() ? "the worker refused the call" : msg));
  }
  r.stream = reply->stream_verdict == kStreamSame    ? StreamCheck::same
             : reply->stream_verdict == kStreamOther ? StreamCheck::other
             : reply->stream_verdict == kStreamInconclusive ? StreamCheck::inconclusive
                                                            : StreamCheck::not_checked;
  const std::size_t passes = eo.time && reply->timed ? 2 : 1;
  for (std::size_t p = 0; p < passes; ++p)
    for (std::size_t s = 0; s < sets.size(); ++s) {
      std::string when = p == 0 ? fmt::format("trial {}: ", s) : fmt::format("while timing (rotation {}): ", s);
      for (std::size_t i = 0; i < ni; ++i) {
        if (!first.inputs[i].is_tensor) continue;
        std::string name = i < input_names.size() ? input_names[i] : fmt::format("#{}", i);
        const InArg& in = sets[s].pass_inputs(p)[i];
        bool guards = guards_intact(at(p, s, i), in.nbytes, i);
        // A fresh input holds the worker's last draw, which the worker checked.
        const bool drawn = p == 1 && fresh && eo.fresh_inputs[i];
        if (!guards || (!drawn && in.nbytes && std::memcmp(at(p, s, i), in.data, in.nbytes) != 0)) {
          r.failed_set = static_cast<int>(s);
          r.while_timing = p == 1;
          return fail(Outcome::failed, when + (guards ? fmt::format("modified input \"{}\"", name)
                                                      : fmt::format("wrote outside input \"{}\" (guard bytes changed)", name)));
        }
      }
      for (std::size_t i = 0; i < no; ++i) {
        std::string name = i < output_names.size() ? output_names[i] : fmt::format("#{}", i);
        if (!guards_intact(at(p, s, ni + i), sets[s].outputs[i].nbytes, ni + i)) {
          r.failed_set = static_cast<int>(s);
          r.while_timing = p == 1;
          return fail(Outcome::failed, when + fmt::format("wrote outside output \"{}\" (guard bytes changed)", name));
        }
        const OutArg& dst = p == 0 ? sets[s].outputs[i] : sets[s].timed_outputs[i];
        if (dst.nbytes && dst.data) std::memcpy(dst.data, at(p, s, ni + i), dst.nbytes);
      }
    }
  if (reply->cuda_device >= 0) {
    reply->pci_bus_id[sizeof reply->pci_bus_id - 1] = '\0';
    r.cuda_device = reply->cuda_device;
    r.pci_bus_id = reply->pci_bus_id;
    if (options_.cuda_device >= 0 && reply->cuda_device != options_.cuda_device)
      return fail(Outcome::failed, fmt::format("{}: the worker ran on CUDA device {}, not on device {} as told", sname,
                                               reply->cuda_device, options_.cuda_device));
  }
  if (fresh && reply->timed) {
    r.fresh_calls = reply->fresh_calls;
    for (std::size_t j = 0; j < kept_slots; ++j) {
      if (reply->kept_serial[j] == 0) continue;
      if (reply->kept_set[j] < 0 || static_cast<std::size_t>(reply->kept_set[j]) >= sets.size() ||
          reply->kept_serial[j] > reply->fresh_calls)
        return fail(Outcome::failed, fmt::format("{}: the worker named a kept call that cannot exist", sname));
      KeptCall k;
      k.serial = reply->kept_serial[j];
      k.set = reply->kept_set[j];
      for (std::size_t i = 0; i < no; ++i) {
        const std::byte* src = base + (2 * sets.size() + j) * stride + offsets[ni + i];
        k.outputs.emplace_back(src, src + first.outputs[i].nbytes);
      }
      r.kept.push_back(std::move(k));
    }
  }
  if (reply->timed) {
    WorkerTiming t;
    t.timer = reply->timing;
    t.ceilings = reply->ceilings;
    t.mma_tflops = reply->mma_tflops;
    if (reply->cupti == kCuptiMeasured) {
      t.cupti = Result<cuda::KernelTimingResult>(reply->cupti_timing);
    } else if (reply->cupti == kCuptiFailed) {
      reply->cupti_error[sizeof reply->cupti_error - 1] = '\0';
      t.cupti = Result<cuda::KernelTimingResult>(make_error(Code::unsupported, reply->cupti_error));
    } else if (eo.cupti) {
      t.cupti = Result<cuda::KernelTimingResult>(
          make_error(Code::unsupported, "the worker did not time with CUPTI (not a CUDA solution)"));
    }
    r.timing = t;
  }
  r.call = CallResult{Outcome::ok, {}, reply->call_ms};
  return r;
}

}  // namespace kb::worker
