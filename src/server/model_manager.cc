#include "server/model_manager.h"

#include <algorithm>

#include "core/large_buffer.h"
#include "core/logging.h"
#include "gguf/gguf_file.h"
#include "vision/projector.h"

namespace mx::server {
namespace {

constexpr std::string_view kSuffix = ".gguf";

bool HasProjectorName(const std::string& file) {
  static constexpr std::string_view kMmproj = ".mmproj.gguf";
  return file.compare(0, 7, "mmproj-") == 0 ||
         (file.size() > kMmproj.size() &&
          file.compare(file.size() - kMmproj.size(), kMmproj.size(), kMmproj) == 0);
}

bool ValidName(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  return name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

ModelManager::ModelManager(Env* env, ModelManagerOptions options) : env_(env), options_(std::move(options)) {}

ModelManager::~ModelManager() { Shutdown(); }

std::vector<std::shared_ptr<ServedModel>> ModelManager::Loaded() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [name, e] : loaded_) out.push_back(e.served);
  return out;
}

Result<std::vector<ModelInfo>> ModelManager::List() {
  MX_ASSIGN_OR_RETURN(auto names, env_->ListDir(options_.models_dir));
  std::vector<ModelInfo> out;
  for (const auto& file : names) {
    if (file.size() <= kSuffix.size() || file.compare(file.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      continue;
    }
    ModelInfo info;
    info.name = file.substr(0, file.size() - kSuffix.size());
    info.path = JoinPath(options_.models_dir, file);
    // What the name points to (a symlink to a model is fine): only regular
    // files are models; a FIFO, folder or dangling link is not listed.
    auto stat = env_->GetFileInfo(info.path);
    if (stat.ok() && !stat->is_regular) continue;
    if (!stat.ok() && stat.status().code() != Status::Code::kNotSupported) continue;
    if (stat.ok()) {
      info.size_bytes = stat->size_bytes;
    } else if (auto size = env_->FileSize(info.path); size.ok()) {
      info.size_bytes = *size;
    }
    if (HasProjectorName(file) || IsProjectorFile(info.path, info.size_bytes)) continue;
    for (const std::string& p : {info.name + ".mmproj.gguf", "mmproj-" + info.name + ".gguf"}) {
      if (std::find(names.begin(), names.end(), p) != names.end()) {
        info.projector = p;
        break;
      }
    }
    out.push_back(std::move(info));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (ModelInfo& info : out) {
      if (auto it = loaded_.find(info.name); it != loaded_.end()) {
        info.loaded = true;
        info.active = it->second.served->scheduler->active();
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const ModelInfo& a, const ModelInfo& b) { return a.name < b.name; });
  return out;
}

Result<std::string> ModelManager::PathOf(const std::string& name) {
  std::string path = JoinPath(options_.models_dir, name + std::string(kSuffix));
  if (!ValidName(name) || !env_->FileExists(path)) {
    return Status::NotFound("model '" + name + "' does not exist (no " + name + ".gguf in " +
                            options_.models_dir + ")");
  }
  // A vision projector is never a model, whether its name or its header says
  // so (List() does not show it either): asking for one is asking for a
  // model that does not exist, and must not unload anything.
  auto not_a_model = [&] {
    return Status::NotFound("model '" + name + "' does not exist: " + name +
                            ".gguf is a vision projector, not a model");
  };
  if (HasProjectorName(name + std::string(kSuffix))) return not_a_model();
  // Never hand a FIFO (or a folder) to the loader: opening it would block
  // while the load lock is held. The Env refuses it too.
  if (auto stat = env_->GetFileInfo(path); stat.ok() && !stat->is_regular) {
    return Status::NotFound("model '" + name + "' does not exist: " + path + " is " +
                            FileTypeName(stat->type) + ", not a model file");
  }
  uint64_t size = 0;
  if (auto stat = env_->GetFileInfo(path); stat.ok()) {
    size = stat->size_bytes;
  } else if (auto file_size = env_->FileSize(path); file_size.ok()) {
    size = *file_size;
  }
  if (IsProjectorFile(path, size)) return not_a_model();
  return path;
}

bool ModelManager::IsProjectorFile(const std::string& path, uint64_t size) {
  {
    std::lock_guard<std::mutex> lock(projector_mu_);
    if (auto it = projector_files_.find(path); it != projector_files_.end() && it->second.first == size) {
      return it->second.second;
    }
  }
  // Opened without a lock held: a slow file must not stall other requests.
  auto f = gguf::GgufFile::Open(env_, path);
  const bool projector = f.ok() && vision::Projector::IsProjector(**f);
  std::lock_guard<std::mutex> lock(projector_mu_);
  projector_files_[path] = {size, projector};
  return projector;
}

std::string ModelManager::ProjectorOf(const std::string& name) {
  for (const std::string& file : {name + ".mmproj.gguf", "mmproj-" + name + ".gguf"}) {
    const std::string path = JoinPath(options_.models_dir, file);
    if (!env_->FileExists(path)) continue;
    if (auto stat = env_->GetFileInfo(path); stat.ok() && !stat->is_regular) continue;
    return path;
  }
  return "";
}

Result<std::shared_ptr<ServedModel>> ModelManager::Acquire(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = loaded_.find(name); it != loaded_.end()) {
      it->second.last_used_us = env_->NowMicros();
      return it->second.served;
    }
  }
  MX_ASSIGN_OR_RETURN(std::string path, PathOf(name));
  // An instance of this model that is being unloaded hands its cached
  // chats to the write queue when its last reply ends: a new instance
  // loaded before that would miss them (they would be re-read).
  WaitUntilRetired(name);
  std::shared_ptr<Loading> loading;
  std::shared_ptr<ServedModel> victim;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto it = loaded_.find(name); it != loaded_.end()) {  // loaded meanwhile
      it->second.last_used_us = env_->NowMicros();
      return it->second.served;
    }
    if (auto it = loading_.find(name); it != loading_.end()) {
      // Someone is loading it: share that load.
      std::shared_ptr<Loading> other = it->second;
      loads_cv_.wait(lock, [&] { return other->done; });
      return other->result;
    }
    if (stopping_.load()) {
      return Status::ResourceExhausted("cannot load model '" + name + "': the server is stopping");
    }
    if (static_cast<int>(loaded_.size() + loading_.size()) >= options_.max_loaded) {
      // The least recently used model nobody is using.
      auto best = loaded_.end();
      for (auto it = loaded_.begin(); it != loaded_.end(); ++it) {
        if (it->second.served.use_count() > 1) continue;
        if (best == loaded_.end() || it->second.last_used_us < best->second.last_used_us) best = it;
      }
      if (best == loaded_.end()) {
        return Status::ResourceExhausted(
            "cannot load model '" + name + "': " + std::to_string(options_.max_loaded) +
            " models are loaded or loading (MATRICXON_MAX_LOADED_MODELS) and all are busy");
      }
      MX_LOG(kInfo) << "unloading model " << best->first << " (least recently used) to load " << name;
      victim = std::move(best->second.served);
      loaded_.erase(best);
    }
    loading = std::make_shared<Loading>();
    loading_[name] = loading;
  }
  if (victim) DropAndWait(std::move(victim));
  Result<std::shared_ptr<ServedModel>> result = Load(name, path);
  std::shared_ptr<ServedModel> discarded;  // freed after the lock is let go
  {
    std::lock_guard<std::mutex> lock(mu_);
    loading_.erase(name);
    if (result.ok() && stopping_.load()) {
      discarded = std::move(*result);
      result = Status::ResourceExhausted("cannot load model '" + name + "': the server is stopping");
    } else if (result.ok()) {
      loaded_[name] = Entry{*result, env_->NowMicros()};
    }
    loading->result = result;
    loading->done = true;
  }
  loads_cv_.notify_all();
  return result;
}

Result<std::shared_ptr<ServedModel>> ModelManager::Load(const std::string& name, const std::string& path) {
  const uint64_t t0 = env_->NowMicros();
  MX_LOG(kInfo) << "loading model " << name << " from " << path;  // a long load shows in the log
  auto served = std::make_shared<ServedModel>();
  served->name = name;
  served->path = path;
  engine::ModelLoadOptions load_options;
  load_options.cancel = &stopping_;
  MX_ASSIGN_OR_RETURN(served->model, engine::LoadedModel::Load(env_, path, load_options));
  if (const std::string mmproj = ProjectorOf(name); !mmproj.empty()) {
    auto projector = vision::Projector::Open(env_, mmproj);
    Status st = projector.ok() ? (*projector)->CheckMatchesModel(served->model->model->config().n_embd)
                               : projector.status();
    if (!st.ok()) {
      return st.WithContext("model '" + name + "' (" + path + ") and its vision projector " + mmproj +
                            " do not go together");
    }
    served->model->projector = std::move(projector).value();
    served->model->projector_path = mmproj;
  }
  engine::SchedulerOptions so = options_.scheduler;
  so.model_name = name;
  so.cancel_start = &stopping_;
  MX_ASSIGN_OR_RETURN(served->scheduler, engine::Scheduler::Create(*served->model, so, env_));
  MX_LOG(kInfo) << "loaded model " << name << " from " << path << " in "
                << (env_->NowMicros() - t0) / 1000 << " ms (context " << served->scheduler->n_ctx()
                << ", " << so.n_parallel << " parallel, " << models::ArchName(served->model->model->config().arch)
                << ", chat template family " << templates::FamilyName(served->model->family)
                << (served->model->family_detected ? "" : " (fallback)")
                << (served->model->projector ? ", takes pictures (" + served->model->projector_path + ")" : "")
                << ")";
  return served;
}

void ModelManager::WaitUntilRetired(const std::string& name) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = retiring_.find(name);
      if (it == retiring_.end()) return;
      if (it->second->load()) {
        retiring_.erase(it);
        return;
      }
    }
    env_->SleepMicros(2000);
  }
}

void ModelManager::DropAndWait(std::shared_ptr<ServedModel> served) {
  const std::shared_ptr<std::atomic<bool>> retired = served->retired;
  const std::string name = served->name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    retiring_[name] = retired;
  }
  served.reset();
  while (!retired->load()) env_->SleepMicros(2000);
  // Freed KV blocks are kept for states of about their size; the model's
  // states are gone, so give their memory back.
  LargeBuffer::ReleaseSpares();
  MX_LOG(kInfo) << "unloaded model " << name;
}

Status ModelManager::Unload(const std::string& name) {
  MX_ASSIGN_OR_RETURN(std::string path, PathOf(name));
  std::shared_ptr<ServedModel> served;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = loaded_.find(name);
    if (it == loaded_.end()) return Status::Ok();
    served = std::move(it->second.served);
    loaded_.erase(it);
  }
  DropAndWait(std::move(served));
  return Status::Ok();
}

void ModelManager::UnloadIdle() {
  if (options_.keep_alive_s <= 0) return;
  std::vector<std::shared_ptr<ServedModel>> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t now = env_->NowMicros();
    for (auto it = loaded_.begin(); it != loaded_.end();) {
      const bool busy = it->second.served.use_count() > 1;
      if (!busy && now - it->second.last_used_us > static_cast<uint64_t>(options_.keep_alive_s) * 1000000) {
        MX_LOG(kInfo) << "model " << it->first << " idle for " << options_.keep_alive_s << " s";
        idle.push_back(std::move(it->second.served));
        it = loaded_.erase(it);
      } else {
        if (busy) it->second.last_used_us = now;
        ++it;
      }
    }
  }
  for (auto& s : idle) DropAndWait(std::move(s));
}

void ModelManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true);
  }
  loads_cv_.notify_all();
}

void ModelManager::Shutdown() {
  Stop();
  std::vector<std::shared_ptr<ServedModel>> all;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Loads in progress stop at their next check (stopping_).
    loads_cv_.wait(lock, [&] { return loading_.empty(); });
    for (auto& [name, e] : loaded_) all.push_back(std::move(e.served));
    loaded_.clear();
  }
  for (auto& s : all) DropAndWait(std::move(s));
}

}  // namespace mx::server
