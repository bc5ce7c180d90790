// FaultEnv: an EnvWrapper for tests that injects disk faults and crashes
// (leveldb's db/fault_injection_test.cc). It forwards to a base Env and
//   - fails the n-th mutating operation (create, append, sync, close, rename,
//     folder sync, remove) of chosen kinds with a chosen errno (ENOSPC ->
//     ResourceExhausted, anything else -> IOError), optionally "sticky": from
//     that operation on, every mutating operation fails, as if the process had
//     died there;
//   - remembers what was written through it and, on DropUnsyncedData(),
//     simulates a power cut: every file shrinks to the bytes last synced, and
//     creations and renames not yet made durable by SyncDir of their folder
//     are undone (newest first).
// Reads (MapReadOnly, ReadFile, ListDir, stat) are never failed.
// Thread-safe (one mutex); meant for tests only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/env.h"

namespace mx {

class FaultEnv : public EnvWrapper {
 public:
  // Kinds of mutating operation, as bits of a mask.
  enum Op : uint32_t {
    kCreate = 1u << 0,   // NewWritableFile
    kAppend = 1u << 1,   // WritableFile::Append
    kSync = 1u << 2,     // WritableFile::Sync
    kClose = 1u << 3,    // WritableFile::Close
    kRename = 1u << 4,   // RenameFile
    kSyncDir = 1u << 5,  // SyncDir
    kRemove = 1u << 6,   // RemoveFile
    kAllOps = 0x7f,
  };

  // REQUIRES: base outlives this Env.
  explicit FaultEnv(Env* base);

  // Arms one fault: counting from now, the n-th (1-based) operation whose
  // kind is in `op_mask` fails with `err`. sticky: that operation and every
  // later mutating operation of any kind fail (a crash).
  void FailNth(uint32_t op_mask, int n, int err, bool sticky = false);
  // Disarms faults and ends a sticky crash.
  void ClearFaults();
  // Operations counted against the armed mask since FailNth (or since
  // construction, with the mask kAllOps).
  int ops_counted() const;
  // Faults injected so far.
  int faults_injected() const;

  // Simulates a crash followed by a reboot: truncates every file written
  // through this Env to its last synced length and undoes creations and
  // renames whose folder was not synced since. Works on the base Env; clears
  // the record and the faults. Returns the first error met while undoing.
  Status DropUnsyncedData();

  Status WriteFileAtomic(const std::string& path, std::string_view data, uint32_t mode) override;
  Status RemoveFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, uint32_t mode,
                                                        bool exclusive) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status SyncDir(const std::string& path) override;

  // Used by the files this Env hands out; not for callers.
  Status MaybeFail(Op op, const std::string& what);
  void RecordAppend(const std::string& path, uint64_t n);
  void RecordSync(const std::string& path);

 private:
  struct FileState {
    uint64_t size = 0;
    uint64_t synced = 0;
  };
  struct DirOp {
    bool is_rename = false;
    std::string from;  // renames only
    std::string to;    // the created or renamed-to path
  };

  mutable std::mutex mu_;
  uint32_t mask_ = kAllOps;
  int fail_at_ = 0;  // 0: no fault armed
  int err_ = 0;
  bool sticky_ = false;
  bool crashed_ = false;
  int counted_ = 0;
  int injected_ = 0;
  std::map<std::string, FileState> files_;  // by current path
  std::vector<DirOp> pending_;              // not yet made durable by SyncDir
};

}  // namespace mx
