#include "cli/line_reader.h"

#include <fcntl.h>
#include <histedit.h>
#include <langinfo.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace mx::cli {
namespace {

// Lines from std::cin: a pipe or a file.
class PlainReader : public LineReader {
 public:
  Outcome Read(const std::string&, std::string* line) override {
    return std::getline(std::cin, *line) ? Outcome::kLine : Outcome::kEof;
  }
  void AddHistory(const std::string&) override {}
  bool editing() const override { return false; }
};

class EditReader : public LineReader {
 public:
  ~EditReader() override {
    if (el_ != nullptr) el_end(el_);
    if (history_ != nullptr) history_end(history_);
  }

  Status Init(const std::string& history_path) {
    UseUtf8Ctype();
    history_path_ = history_path;
    history_ = history_init();
    HistEvent ev;
    history(history_, &ev, H_SETSIZE, 1000);
    history(history_, &ev, H_SETUNIQUE, 1);
    if (!history_path_.empty()) {
      // Chats are private: the file is the user's alone from its first byte.
      int fd = open(history_path_.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
      if (fd < 0) {
        return Status::IOError("--history " + history_path_ + ": " + std::strerror(errno));
      }
      close(fd);
      history(history_, &ev, H_LOAD, history_path_.c_str());  // an empty file loads nothing
    }
    el_ = el_init("matricxon", stdin, stdout, stderr);
    if (el_ == nullptr) return Status::IOError("libedit could not set up the terminal");
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_PROMPT, &EditReader::PromptOf);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_HIST, history, history_);
    // libedit restores the terminal around SIGINT/SIGTSTP/SIGWINCH and then
    // calls the handler that was there before it (the InterruptCatcher's).
    el_set(el_, EL_SIGNAL, 1);
    el_source(el_, nullptr);  // ~/.editrc, when there is one
    return Status::Ok();
  }

  Outcome Read(const std::string& prompt, std::string* line) override {
    prompt_ = prompt;
    int count = 0;
    errno = 0;
    const char* got = el_gets(el_, &count);
    if (got == nullptr) {
      const bool interrupted = count < 0 && errno == EINTR;
      std::fputc('\n', stdout);
      std::fflush(stdout);
      if (!interrupted) return Outcome::kEof;
      el_reset(el_);
      return Outcome::kInterrupted;
    }
    line->assign(got, static_cast<size_t>(count));
    while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
    return Outcome::kLine;
  }

  void AddHistory(const std::string& line) override {
    if (line.empty()) return;
    HistEvent ev;
    history(history_, &ev, H_ENTER, line.c_str());
    if (!history_path_.empty()) history(history_, &ev, H_SAVE, history_path_.c_str());
  }

  bool editing() const override { return true; }

 private:
  static const char* PromptOf(EditLine* el) {
    EditReader* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return self->prompt_.c_str();
  }

  // libedit reads multibyte input in the LC_CTYPE codeset: take the user's
  // when it is UTF-8, else C.UTF-8 (present on every Debian system).
  static void UseUtf8Ctype() {
    std::setlocale(LC_CTYPE, "");
    if (std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0) std::setlocale(LC_CTYPE, "C.UTF-8");
  }

  EditLine* el_ = nullptr;
  History* history_ = nullptr;
  std::string prompt_;
  std::string history_path_;
};

}  // namespace

Result<std::unique_ptr<LineReader>> LineReader::Open(bool terminal,
                                                     const std::string& history_path) {
  if (!terminal) return std::unique_ptr<LineReader>(new PlainReader());
  auto reader = std::make_unique<EditReader>();
  MX_RETURN_IF_ERROR(reader->Init(history_path));
  return std::unique_ptr<LineReader>(std::move(reader));
}

}  // namespace mx::cli
