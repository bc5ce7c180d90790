#!/usr/bin/env python3
"""`matricxon chat` on a real terminal (a pty): line editing and history,
/help and /stats, Ctrl-C at the prompt (the line is dropped) and during a
reply (back to the prompt, the chat goes on and reuses its state), --stats
per turn, the --history file (mode 0600), Ctrl-D to leave.

usage: chat_pty_test.py MATRICXON_BINARY WORK_DIR
Every wait is bounded; a failure prints what the terminal showed."""
import os
import pty
import re
import select
import shutil
import stat
import subprocess
import sys
import time

LEFT, UP, CTRL_C, CTRL_D = b"\x1b[D", b"\x1b[A", b"\x03", b"\x04"


class Terminal:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm"
            os.environ.setdefault("LANG", "C.UTF-8")
            os.execv(argv[0], argv)
        self.out = b""
        self.mark = 0  # expect() looks at what came after the last match

    def pump(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return False
                if not data:
                    return False
                self.out += data
        return True

    def expect(self, pattern, timeout=60):
        """Waits (bounded) for `pattern` in the output after the last match."""
        regex = re.compile(pattern.encode(), re.S)
        end = time.monotonic() + timeout
        while True:
            m = regex.search(self.out, self.mark)
            if m:
                self.mark = m.end()
                return m
            if time.monotonic() > end or not self.pump(0.1):
                m = regex.search(self.out, self.mark)  # what came with the last read
                if m:
                    self.mark = m.end()
                    return m
                fail(f"waited for {pattern!r}; the terminal showed:\n{self.tail()}")

    def wait_for_bytes(self, n, timeout=60):
        """Waits until n more bytes came after the last match."""
        end = time.monotonic() + timeout
        while len(self.out) - self.mark < n:
            if time.monotonic() > end or not self.pump(0.05):
                fail(f"waited for {n} bytes of reply; the terminal showed:\n{self.tail()}")
        self.mark = len(self.out)

    def send(self, data):
        os.write(self.fd, data)

    def tail(self):
        return self.out[-3000:].decode("utf-8", "replace")


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def main():
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model, history = work + "/chat.gguf", work + "/history"
    subprocess.run([binary, "make-model", "--quiet", "--preset", "tiny", "--context", "32768",
                    "--out", model], check=True)
    # A reply that would run to the end of a 32k context (tens of seconds):
    # Ctrl-C is the only way it ends early.
    term = Terminal([binary, "chat", "--model", model, "--stats", "--ignore-eos",
                     "--temperature", "0", "--threads", "1", "--ctx", "32768",
                     "--max-tokens", "32000", "--history", history])
    term.expect(r"/help lists the commands.*?> ")

    # Line editing: "/hlp", two steps left, "e" -> "/help".
    term.send(b"/hlp" + LEFT + LEFT + b"e\r")
    term.expect(r"/reset   start a new chat.*?> ")
    # History: Up brings "/help" back.
    term.send(UP + b"\r")
    term.expect(r"/reset   start a new chat.*?> ")
    # Ctrl-C at the prompt drops the line typed: "abc" never reaches /stats.
    term.send(b"abc")
    term.expect(r"abc")
    term.send(CTRL_C)
    term.expect(r"> ")
    term.send(b"/stats\r")
    term.expect(r"stats off.*?> ")
    term.send(b"/stats\r")
    term.expect(r"stats on.*?> ")
    term.send(b"/frobnicate\r")
    term.expect(r"unknown command /frobnicate; /help lists them.*?> ")

    # Ctrl-C during a reply: back to the prompt, with the turn's stats.
    term.send(b"Hi there\r")
    term.expect(r"Hi there\r?\n")
    term.wait_for_bytes(200)
    term.send(CTRL_C)
    m1 = term.expect(r"\[stopped\].*?\[turn 1: prompt (\d+) tokens, 0 reused, (\d+) read in "
                     r"[0-9.]+ s; (\d+) generated")
    prompt1, generated1 = int(m1.group(1)), int(m1.group(3))
    if int(m1.group(2)) != prompt1:
        fail(f"turn 1 read {m1.group(2)} of its {prompt1} prompt tokens")
    if not 0 < generated1 < 32000:
        fail(f"turn 1 generated {generated1} tokens: Ctrl-C did not stop the reply")
    term.expect(r"> ")

    # The chat goes on: turn 2 reuses at least turn 1's prompt.
    term.send(b"And again\r")
    term.expect(r"And again\r?\n")
    term.wait_for_bytes(200)
    term.send(CTRL_C)
    m2 = term.expect(r"\[stopped\].*?\[turn 2: prompt (\d+) tokens, (\d+) reused, (\d+) read in ")
    prompt2, reused2, read2 = (int(g) for g in m2.groups())
    if reused2 < prompt1 or reused2 + read2 != prompt2:
        fail(f"turn 2: {reused2} reused + {read2} read of {prompt2}; turn 1's prompt was {prompt1}")
    term.expect(r"> ")

    term.send(CTRL_D)
    _, status = os.waitpid(term.pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        fail(f"chat ended with status {status}; the terminal showed:\n{term.tail()}")

    mode = stat.S_IMODE(os.stat(history).st_mode)
    if mode != 0o600:
        fail(f"the history file has mode {mode:o}, not 600")
    with open(history, "rb") as f:
        saved = f.read()
    # libedit's format: a header line, then one line each, spaces as \\040.
    for line in (b"/help", b"Hi\\040there", b"And\\040again"):
        if b"\n" + line + b"\n" not in saved:
            fail(f"the history file lacks {line!r}: {saved!r}")
    print(f"ok: turn 1 read {prompt1} tokens and stopped after {generated1}; "
          f"turn 2 reused {reused2} of {prompt2}")


if __name__ == "__main__":
    main()
