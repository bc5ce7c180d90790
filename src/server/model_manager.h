// ModelManager: the GGUF files of the models folder, loaded on first use.
// A model's name is its file name without ".gguf". Vision projectors
// (NAME.mmproj.gguf or mmproj-NAME.gguf, or any GGUF whose
// general.architecture is "clip") are never models: NAME's projector is
// loaded with NAME and lets it take pictures (SPEC §11). At most
// `max_loaded` models are in memory; loading one more unloads the least
// recently used idle one. Idle models unload after `keep_alive_s`.
// A ServedModel is handed out as a shared_ptr: a request holds it for the
// whole reply, so unloading (which drops the manager's reference and then
// waits) never cuts a reply in flight.
// Loads run outside the manager's lock, one per model: a model that loads
// slowly never delays another model's load (or any request for a loaded
// model), and requests for a model being loaded wait for that one load.
// Models loaded plus models loading never exceed `max_loaded`. Stop() makes
// every load in progress give up at its next check, so shutdown is prompt.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "grammar/grammar_vocab.h"

namespace mx::server {

struct ServedModel {
  std::string name;
  std::string path;
  std::unique_ptr<engine::LoadedModel> model;
  std::unique_ptr<engine::Scheduler> scheduler;  // declared after model: destroyed first
  // The vocabulary as constrained decoding sees it, by the special-token
  // texts let through as text ("" = none; output_constraint.h
  // ModelGrammarVocab builds each on first use).
  std::mutex grammar_vocab_mu;
  std::map<std::string, std::shared_ptr<const grammar::GrammarVocab>> grammar_vocabs;
  // Set once the scheduler is gone (its cached chats queued for the disk).
  // A weak_ptr to the model expires before this destructor runs, so that is
  // what waiting for an unload has to watch.
  std::shared_ptr<std::atomic<bool>> retired = std::make_shared<std::atomic<bool>>(false);
  ~ServedModel() {
    scheduler.reset();
    retired->store(true);
  }
};

struct ModelManagerOptions {
  std::string models_dir;
  int max_loaded = 2;
  int64_t keep_alive_s = 1800;  // 0: never
  engine::SchedulerOptions scheduler;
};

struct ModelInfo {
  std::string name;
  std::string path;
  uint64_t size_bytes = 0;
  std::string projector;  // the vision projector's file name beside it; "" when none
  bool loaded = false;
  int active = 0;  // requests decoding now (loaded only)
};

class ModelManager {
 public:
  ModelManager(Env* env, ModelManagerOptions options);
  ~ModelManager();

  // The GGUF files of the folder, sorted by name.
  Result<std::vector<ModelInfo>> List();
  // The model, loading it first when needed. NotFound for an unknown name;
  // ResourceExhausted when max_loaded models are busy.
  Result<std::shared_ptr<ServedModel>> Acquire(const std::string& name);
  // Unloads `name`, waiting until no request holds it. NotFound when it is
  // not a model of the folder; OK when it was not loaded.
  Status Unload(const std::string& name);
  // The models loaded now (for stats; holding one delays its unload).
  std::vector<std::shared_ptr<ServedModel>> Loaded();
  // Unloads models idle for longer than keep_alive_s (call periodically).
  void UnloadIdle();
  // Refuses new loads (ResourceExhausted "the server is stopping") and
  // cancels those in progress; requests for models loaded already still get
  // them. Returns at once.
  void Stop();
  // Stop(), waits for the loads in progress to end, then unloads everything
  // (waits for replies in flight).
  void Shutdown();

 private:
  struct Entry {
    std::shared_ptr<ServedModel> served;
    uint64_t last_used_us = 0;
  };
  // One model's load in progress; requests for the same model wait on it.
  struct Loading {
    bool done = false;                    // guarded by mu_
    Result<std::shared_ptr<ServedModel>> result = Status::Internal("loading");  // mu_, once done
  };
  // Loads `name` from `path` (no lock held).
  Result<std::shared_ptr<ServedModel>> Load(const std::string& name, const std::string& path);
  Result<std::string> PathOf(const std::string& name);
  // NAME.mmproj.gguf or mmproj-NAME.gguf when one is a regular file of the
  // folder (that order); "" otherwise.
  std::string ProjectorOf(const std::string& name);
  // Whether a GGUF file of the folder is a projector by its header
  // (remembered per path and size). Opens the file with no lock held.
  bool IsProjectorFile(const std::string& path, uint64_t size);
  // Drops the entry from the table and waits until its last user is done.
  void DropAndWait(std::shared_ptr<ServedModel> served);
  // Waits until no instance of `name` that is being unloaded is left (its
  // scheduler has queued its cached chats for the disk).
  void WaitUntilRetired(const std::string& name);

  Env* env_;
  ModelManagerOptions options_;
  std::mutex mu_;
  std::condition_variable loads_cv_;                                  // a load ended (mu_)
  std::atomic<bool> stopping_{false};                                 // Stop() was called
  std::map<std::string, Entry> loaded_;                               // guarded by mu_
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> retiring_;  // ServedModel::retired of unloads; mu_
  std::map<std::string, std::shared_ptr<Loading>> loading_;           // guarded by mu_
  std::mutex projector_mu_;
  std::map<std::string, std::pair<uint64_t, bool>> projector_files_;  // path -> (size, is one); projector_mu_
};

}  // namespace mx::server
