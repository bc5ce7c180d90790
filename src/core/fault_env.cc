#include "core/fault_env.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace mx {
namespace {

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status ErrStatus(int err, const std::string& what) {
  std::string msg = what + ": " + std::strerror(err) + " (injected)";
  if (err == ENOSPC || err == EDQUOT) return Status::ResourceExhausted(msg);
  return Status::IOError(msg);
}

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultEnv* env, std::unique_ptr<WritableFile> base)
      : env_(env), base_(std::move(base)) {}
  Status Append(std::string_view data) override {
    MX_RETURN_IF_ERROR(env_->MaybeFail(FaultEnv::kAppend, "append to " + path()));
    MX_RETURN_IF_ERROR(base_->Append(data));
    env_->RecordAppend(path(), data.size());
    return Status::Ok();
  }
  Status Sync() override {
    MX_RETURN_IF_ERROR(env_->MaybeFail(FaultEnv::kSync, "fsync " + path()));
    MX_RETURN_IF_ERROR(base_->Sync());
    env_->RecordSync(path());
    return Status::Ok();
  }
  Status Close() override {
    Status injected = env_->MaybeFail(FaultEnv::kClose, "close " + path());
    Status st = base_->Close();  // the descriptor is released either way
    return injected.ok() ? st : injected;
  }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultEnv* env_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

FaultEnv::FaultEnv(Env* base) : EnvWrapper(base) {}

void FaultEnv::FailNth(uint32_t op_mask, int n, int err, bool sticky) {
  std::lock_guard<std::mutex> lock(mu_);
  mask_ = op_mask;
  fail_at_ = n;
  err_ = err;
  sticky_ = sticky;
  crashed_ = false;
  counted_ = 0;
}

void FaultEnv::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_ = 0;
  sticky_ = false;
  crashed_ = false;
}

int FaultEnv::ops_counted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counted_;
}

int FaultEnv::faults_injected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_;
}

Status FaultEnv::MaybeFail(Op op, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (crashed_) {
    ++injected_;
    return ErrStatus(err_, what);
  }
  if ((mask_ & op) == 0) return Status::Ok();
  ++counted_;
  if (fail_at_ > 0 && counted_ == fail_at_) {
    ++injected_;
    if (sticky_) crashed_ = true;
    return ErrStatus(err_, what);
  }
  return Status::Ok();
}

void FaultEnv::RecordAppend(const std::string& path, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  files_[path].size += n;
}

void FaultEnv::RecordSync(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  FileState& f = files_[path];
  f.synced = f.size;
}

Status FaultEnv::WriteFileAtomic(const std::string& path, std::string_view data, uint32_t mode) {
  MX_RETURN_IF_ERROR(MaybeFail(kCreate, "write " + path));
  return target()->WriteFileAtomic(path, data, mode);
}

Status FaultEnv::RemoveFile(const std::string& path) {
  MX_RETURN_IF_ERROR(MaybeFail(kRemove, "unlink " + path));
  MX_RETURN_IF_ERROR(target()->RemoveFile(path));
  std::lock_guard<std::mutex> lock(mu_);
  files_.erase(path);
  return Status::Ok();
}

Result<std::unique_ptr<WritableFile>> FaultEnv::NewWritableFile(const std::string& path,
                                                                uint32_t mode, bool exclusive) {
  MX_RETURN_IF_ERROR(MaybeFail(kCreate, "create " + path));
  MX_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base,
                      target()->NewWritableFile(path, mode, exclusive));
  {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path] = FileState{};
    pending_.push_back(DirOp{false, "", path});
  }
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, std::move(base)));
}

Status FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  MX_RETURN_IF_ERROR(MaybeFail(kRename, "rename " + from));
  MX_RETURN_IF_ERROR(target()->RenameFile(from, to));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(from);
  if (it != files_.end()) {
    files_[to] = it->second;
    files_.erase(from);
  }
  pending_.push_back(DirOp{true, from, to});
  return Status::Ok();
}

Status FaultEnv::SyncDir(const std::string& path) {
  MX_RETURN_IF_ERROR(MaybeFail(kSyncDir, "fsync folder " + path));
  MX_RETURN_IF_ERROR(target()->SyncDir(path));
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DirOp> keep;
  for (auto& op : pending_) {
    if (ParentDir(op.to) != path) keep.push_back(std::move(op));
  }
  pending_ = std::move(keep);
  return Status::Ok();
}

Status FaultEnv::DropUnsyncedData() {
  std::map<std::string, FileState> files;
  std::vector<DirOp> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    files.swap(files_);
    pending.swap(pending_);
    fail_at_ = 0;
    sticky_ = false;
    crashed_ = false;
  }
  Env* base = target();
  Status first;
  auto note = [&first](const Status& st) {
    if (!st.ok() && first.ok()) first = st;
  };
  // 1. Unsynced appends are lost.
  for (const auto& [path, state] : files) {
    if (state.synced >= state.size || !base->FileExists(path)) continue;
    Result<std::string> data = base->ReadFile(path);
    if (!data.ok()) {
      note(data.status());
      continue;
    }
    std::string kept = data.value().substr(0, state.synced);
    auto file = base->NewWritableFile(path, 0600, /*exclusive=*/false);
    if (!file.ok()) {
      note(file.status());
      continue;
    }
    note(file.value()->Append(kept));
    note(file.value()->Sync());
    note(file.value()->Close());
  }
  // 2. Folder entries not made durable are lost, newest first.
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
    if (!base->FileExists(it->to)) continue;
    if (it->is_rename) {
      note(base->RenameFile(it->to, it->from));
    } else {
      note(base->RemoveFile(it->to));
    }
  }
  return first;
}

}  // namespace mx
