#include "common/python_script.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace kb::python {

TempDir::~TempDir() {
  if (!path.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
}

Result<std::filesystem::path> make_temp_dir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = fmt::format("{}/{}-XXXXXX", base && *base ? base : "/tmp", prefix);
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    return make_error(Code::io_error, fmt::format("torch reference: cannot create a temporary directory {}: {}", tmpl,
                                                  std::strerror(errno)));
  return std::filesystem::path(buf.data());
}

Status write_text(const std::filesystem::path& p, std::string_view text) {
  std::ofstream f(p, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f) return make_error(Code::io_error, fmt::format("torch reference: cannot write {}", p.string()));
  return ok_status();
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string last_lines(const std::string& text, std::size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += "\n    " + lines[i];
  return out;
}

Result<ScriptRun> run_script(const std::string& python, double timeout_s, const std::filesystem::path& dir,
                             std::string_view script_name, std::string_view script,
                             const std::vector<std::string>& extra) {
  auto script_path = dir / std::string(script_name);
  KB_TRY(write_text(script_path, script));
  std::vector<std::string> argv_s{python, "-B", script_path.string(), dir.string()};
  argv_s.insert(argv_s.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string out_path = (dir / "stdout.txt").string(), err_path = (dir / "stderr.txt").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return make_error(Code::not_found, fmt::format("torch reference: cannot start {}: {}{}", python, std::strerror(rc),
                                                   rc == ENOENT ? " (is python3 installed and on PATH?)" : ""));
  ScriptRun run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR)
      return make_error(Code::internal, fmt::format("torch reference: waitpid: {}", std::strerror(errno)));
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      run.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!run.timed_out) run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.error = read_text(dir / "error.txt");
  run.stderr_text = read_text(err_path);
  return run;
}

}  // namespace kb::python
