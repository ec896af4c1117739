#include "ymlopt/scheduler/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ymlopt/scheduler/executor.hpp"

namespace fs = std::filesystem;

namespace ymlopt {

// ---------- Hash64 ----------

namespace {

constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ULL, kP2 = 0xC2B2AE3D27D4EB4FULL, kP3 = 0x165667B19E3779F9ULL,
                        kP4 = 0x85EBCA77C2B2AE63ULL, kP5 = 0x27D4EB2F165667C5ULL;

inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint64_t round64(std::uint64_t acc, std::uint64_t in) {
  return std::rotl(acc + in * kP2, 31) * kP1;
}
inline std::uint64_t avalanche(std::uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace

Hash64::Hash64(std::uint64_t seed) : acc_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1} {}

void Hash64::block(const unsigned char* p) {
  for (int i = 0; i < 4; ++i) acc_[i] = round64(acc_[i], load64(p + 8 * i));
}

Hash64& Hash64::add(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += bytes;
  if (buffered_) {
    const std::size_t n = std::min(bytes, 32 - buffered_);
    std::memcpy(buf_ + buffered_, p, n);
    buffered_ += n, p += n, bytes -= n;
    if (buffered_ < 32) return *this;
    block(buf_);
    buffered_ = 0;
  }
  for (; bytes >= 32; p += 32, bytes -= 32) block(p);
  std::memcpy(buf_, p, bytes);
  buffered_ = bytes;
  return *this;
}

Hash64& Hash64::add(std::string_view s) {
  add(std::uint64_t(s.size()));
  return add(s.data(), s.size());
}

Hash64& Hash64::add(std::uint64_t v) { return add(&v, sizeof v); }

std::uint64_t Hash64::digest() const {
  std::uint64_t h = std::rotl(acc_[0], 1) + std::rotl(acc_[1], 7) + std::rotl(acc_[2], 12) + std::rotl(acc_[3], 18);
  for (int i = 0; i < 4; ++i) h = (h ^ round64(0, acc_[i])) * kP1 + kP4;
  h += total_;
  std::size_t i = 0;
  for (; i + 8 <= buffered_; i += 8) h = std::rotl(h ^ round64(0, load64(buf_ + i)), 27) * kP1 + kP4;
  for (; i < buffered_; ++i) h = std::rotl(h ^ (buf_[i] * kP5), 11) * kP1;
  return avalanche(h);
}

std::string hex64(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// ---------- Checkpoint ----------

namespace {

constexpr char kMagic[8] = {'Y', 'M', 'L', 'C', 'K', 'P', 'T', '1'};
constexpr std::size_t kHeader = 32;                   // magic, version, content hash, bytes
constexpr std::size_t kQueueLimit = std::size_t(512) << 20;  // outputs waiting for the writer

bool writes(Access a) { return a != Access::read; }
bool reads(Access a) { return a != Access::write; }

std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return Hash64(a).add(b).digest(); }

// Hashes the logical content of a view (row by row: padded strides excluded).
std::uint64_t content_hash(const TensorView& v) {
  Hash64 h;
  const std::size_t es = dtype_size(v.dtype), row = std::size_t(v.cols) * es;
  const auto* p = static_cast<const unsigned char*>(v.data);
  for (std::int64_t r = 0; r < v.rows; ++r) h.add(p + std::size_t(r * v.ld) * es, row);
  return h.digest();
}

std::string object_path(const std::string& dir, std::uint64_t version) {
  return dir + "/objects/" + hex64(version) + ".bin";
}
std::string marker_path(const std::string& dir, std::uint64_t key) {
  return dir + "/tasks/" + hex64(key) + ".json";
}

// Writes through a temporary file in the same directory, then renames.
void write_atomic(const std::string& path, const void* header, std::size_t hbytes, const void* data,
                  std::size_t bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write '" + tmp + "': " + std::strerror(errno));
  const bool ok = (hbytes == 0 || std::fwrite(header, 1, hbytes, f) == hbytes) &&
                  (bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes);
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write '" + tmp + "': " + std::strerror(ok ? errno : err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename '" + tmp + "': " + std::strerror(errno));
  }
}

bool read_object(const std::string& path, std::uint64_t version, std::vector<unsigned char>& out,
                 std::uint64_t* content) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  unsigned char h[kHeader];
  if (!f.read(reinterpret_cast<char*>(h), kHeader) || std::memcmp(h, kMagic, 8) != 0 || load64(h + 8) != version)
    return false;
  const std::uint64_t bytes = load64(h + 24);
  out.resize(bytes);
  if (bytes && !f.read(reinterpret_cast<char*>(out.data()), std::streamsize(bytes))) return false;
  if (f.peek() != std::char_traits<char>::eof()) return false;
  *content = load64(h + 16);
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Checkpoint::Checkpoint(const Dag& dag, const DataStore& store, std::string dir, bool resume)
    : dag_(dag), dir_(std::move(dir)) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::create_directories(dir_ + "/objects", ec);
  if (!ec) fs::create_directories(dir_ + "/tasks", ec);
  if (ec) throw std::runtime_error("cannot create checkpoint directory '" + dir_ + "': " + ec.message());
  // temporary files of a run that was killed while writing them
  for (const char* sub : {"/objects", "/tasks"})
    for (const auto& e : fs::directory_iterator(dir_ + sub, ec))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
  compute_keys(store);
  if (resume) plan();
  stats_.plan_seconds = seconds_since(t0);
  writer_ = std::thread([this] { writer_loop(); });
}

Checkpoint::~Checkpoint() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  space_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void Checkpoint::compute_keys(const DataStore& store) {
  // Per data: the version of the whole tensor and of each tile, and which
  // task outputs they come from (none: the initial value).
  struct State {
    std::uint64_t whole = 0;
    bool whole_fresh = true;  // false after tile writes: the whole is their join
    std::vector<Producer> whole_from;
    std::vector<std::uint64_t> tile;
    std::vector<std::vector<Producer>> tile_from;
  };
  std::vector<State> st(dag_.data.size());
  for (size_t d = 0; d < dag_.data.size(); ++d) {
    const DataDecl& dd = dag_.data[d];
    Hash64 h;
    h.add(std::uint64_t(dd.dtype));
    for (auto x : dd.shape) h.add(std::uint64_t(x));
    if (dd.init == InitKind::file && store.base(std::int32_t(d))) {
      h.add("file");
      h.add(content_hash(store.view(DataRef{std::int32_t(d), -1})));
    } else {
      h.add("init").add(std::uint64_t(dd.init)).add(dd.seed);
      h.add(std::bit_cast<std::uint64_t>(dd.value));
    }
    st[d].whole = h.digest();
    st[d].tile.resize(size_t(dd.ntiles()));
    st[d].tile_from.resize(size_t(dd.ntiles()));
    for (size_t t = 0; t < st[d].tile.size(); ++t) st[d].tile[t] = mix(st[d].whole, t);
  }
  const size_t n = dag_.tasks.size();
  key_.assign(n, 0);
  out_version_.assign(n, {});
  producers_.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    const TaskNode& t = dag_.tasks[i];
    Hash64 h;
    h.add("ymlopt.task.1").add(t.comp->name);
    for (const ArgValue& a : t.args.values()) h.add(std::bit_cast<std::uint64_t>(a.number)).add(a.text);
    producers_[i].resize(t.bindings.size());
    for (size_t b = 0; b < t.bindings.size(); ++b) {
      const Binding& bd = t.bindings[b];
      h.add(std::uint64_t(b)).add(std::uint64_t(bd.mode));
      if (bd.ref.data < 0) {
        h.add("unbound");
        continue;
      }
      State& s = st[size_t(bd.ref.data)];
      const DataDecl& dd = dag_.data[size_t(bd.ref.data)];
      h.add(dd.name).add(std::uint64_t(std::int64_t(bd.ref.tile))).add(std::uint64_t(dd.dtype));
      for (auto x : dag_.ref_shape(bd.ref)) h.add(std::uint64_t(x));
      if (!reads(bd.mode)) continue;
      if (bd.ref.tile < 0) {
        if (!s.whole_fresh) {  // the join of its tiles
          Hash64 j(0x6a6f696eULL);
          s.whole_from.clear();
          for (size_t tt = 0; tt < s.tile.size(); ++tt) {
            j.add(s.tile[tt]);
            s.whole_from.insert(s.whole_from.end(), s.tile_from[tt].begin(), s.tile_from[tt].end());
          }
          s.whole = j.digest();
          s.whole_fresh = true;
        }
        h.add(s.whole);
        producers_[i][b] = s.whole_from;
      } else {
        h.add(s.tile[size_t(bd.ref.tile)]);
        producers_[i][b] = s.tile_from[size_t(bd.ref.tile)];
      }
    }
    key_[i] = h.digest();
    out_version_[i].assign(t.bindings.size(), 0);
    for (size_t b = 0; b < t.bindings.size(); ++b) {
      const Binding& bd = t.bindings[b];
      if (bd.ref.data < 0 || !writes(bd.mode)) continue;
      const std::uint64_t v = mix(key_[i], b);
      out_version_[i][b] = v;
      State& s = st[size_t(bd.ref.data)];
      const Producer me{std::int32_t(i), std::int32_t(b)};
      if (bd.ref.tile < 0) {
        s.whole = v;
        s.whole_fresh = true;
        s.whole_from = {me};
        for (size_t tt = 0; tt < s.tile.size(); ++tt) s.tile[tt] = mix(v, tt), s.tile_from[tt] = {me};
      } else {
        s.tile[size_t(bd.ref.tile)] = v;
        s.tile_from[size_t(bd.ref.tile)] = {me};
        s.whole_fresh = false;
      }
    }
  }
}

bool Checkpoint::valid_object(std::uint64_t version, std::uint64_t content, std::int64_t bytes) const {
  std::vector<unsigned char> data;
  std::uint64_t stored = 0;
  if (!read_object(object_path(dir_, version), version, data, &stored)) return false;
  return stored == content && std::int64_t(data.size()) == bytes && Hash64().add(data.data(), data.size()).digest() == content;
}

void Checkpoint::plan() {
  const size_t n = dag_.tasks.size();
  rerun_.assign(n, 1);
  markers_.assign(n, {});
  needed_.assign(n, {});
  // a task can be restored when its marker lists every output it writes and
  // the objects are there with the stored size
  for (size_t i = 0; i < n; ++i) {
    needed_[i].assign(dag_.tasks[i].bindings.size(), 0);
    bool has_output = false;
    for (auto v : out_version_[i]) has_output |= v != 0;
    if (!has_output) continue;  // io.save and other side effects run again
    std::ifstream f(marker_path(dir_, key_[i]));
    if (!f) continue;
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    bool ok = true;
    try {
      const auto j = nlohmann::json::parse(text);
      std::vector<char> seen(out_version_[i].size(), 0);
      for (const auto& o : j.at("outputs")) {
        const auto b = o.at("binding").get<size_t>();
        if (b >= seen.size() || o.at("version").get<std::string>() != hex64(out_version_[i][b])) {
          ok = false;
          break;
        }
        std::error_code ec;
        const auto size = fs::file_size(object_path(dir_, out_version_[i][b]), ec);
        ok = ok && !ec && size == kHeader + o.at("bytes").get<std::uint64_t>();
        seen[b] = 1;
      }
      for (size_t b = 0; b < seen.size(); ++b) ok = ok && (out_version_[i][b] == 0 || seen[b]);
    } catch (const std::exception&) {
      ok = false;
    }
    if (ok) {
      rerun_[i] = 0;
      markers_[i] = std::move(text);
    } else {
      ++stats_.tasks_invalid;
    }
  }
  // outputs that re-executed tasks read must be restored; check their content
  // (a damaged object makes its task run again, which may need more restores)
  std::vector<std::vector<char>> verified(n);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& v : needed_) std::fill(v.begin(), v.end(), 0);
    for (size_t i = 0; i < n; ++i) {
      if (!rerun_[i]) continue;
      for (const auto& from : producers_[i])
        for (const Producer& p : from) needed_[size_t(p.task)][size_t(p.binding)] = 1;
    }
    for (size_t i = 0; i < n && !changed; ++i) {
      if (rerun_[i]) continue;
      verified[i].resize(needed_[i].size(), 0);
      const auto j = nlohmann::json::parse(markers_[i]);
      for (const auto& o : j.at("outputs")) {
        const auto b = o.at("binding").get<size_t>();
        if (!needed_[i][b] || verified[i][b]) continue;
        const std::uint64_t content = std::stoull(o.at("content").get<std::string>(), nullptr, 16);
        if (valid_object(out_version_[i][b], content, o.at("bytes").get<std::int64_t>())) {
          verified[i][b] = 1;
          continue;
        }
        rerun_[i] = 1;
        markers_[i].clear();
        ++stats_.tasks_invalid;
        changed = true;
        break;
      }
    }
  }
}

std::int64_t Checkpoint::planned_reruns() const {
  if (rerun_.empty()) return std::int64_t(dag_.tasks.size());
  return std::int64_t(std::count(rerun_.begin(), rerun_.end(), 1));
}

void Checkpoint::restore(const TaskNode& t, std::span<const TensorView> views, TaskRecord& rec) {
  const size_t i = size_t(t.id);
  const auto j = nlohmann::json::parse(markers_[i]);
  std::int64_t bytes = 0;
  for (const auto& o : j.at("outputs")) {
    const auto b = o.at("binding").get<size_t>();
    if (!needed_[i][b]) continue;
    std::vector<unsigned char> data;
    std::uint64_t content = 0;
    const TensorView& v = views[b];
    const std::size_t es = dtype_size(v.dtype), row = std::size_t(v.cols) * es;
    if (!read_object(object_path(dir_, out_version_[i][b]), out_version_[i][b], data, &content) ||
        data.size() != row * std::size_t(v.rows))
      throw std::runtime_error("checkpoint object " + object_path(dir_, out_version_[i][b]) +
                               " changed during the run");
    auto* dst = static_cast<unsigned char*>(v.data);
    for (std::int64_t r = 0; r < v.rows; ++r) std::memcpy(dst + std::size_t(r * v.ld) * es, data.data() + size_t(r) * row, row);
    bytes += std::int64_t(data.size());
  }
  if (j.contains("results"))
    for (const auto& r : j["results"]) rec.results.emplace_back(r.at(0).get<std::string>(), r.at(1).get<double>());
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.tasks_restored;
  stats_.bytes_restored += bytes;
}

void Checkpoint::persist(const TaskNode& t, std::span<const TensorView> views, const TaskRecord& rec) {
  const size_t i = size_t(t.id);
  if (std::all_of(out_version_[i].begin(), out_version_[i].end(), [](std::uint64_t v) { return v == 0; }))
    return;  // no outputs (io.save): nothing to restore, it runs again
  const auto t0 = std::chrono::steady_clock::now();
  Job job;
  job.task = t.id;
  nlohmann::json m = {{"task", t.id}, {"component", t.comp->name}, {"key", hex64(key_[i])}};
  if (!t.label.empty()) m["name"] = t.label;
  nlohmann::json results = nlohmann::json::array();
  for (const auto& [k, v] : rec.results) results.push_back({k, v});
  m["results"] = results;
  std::size_t total = 0;
  for (size_t b = 0; b < t.bindings.size(); ++b) {
    if (out_version_[i][b] == 0) continue;
    const TensorView& v = views[b];
    const std::size_t es = dtype_size(v.dtype), row = std::size_t(v.cols) * es;
    Object o;
    o.version = out_version_[i][b];
    o.binding = std::int32_t(b);
    o.bytes.resize(row * std::size_t(v.rows));
    const auto* src = static_cast<const unsigned char*>(v.data);
    for (std::int64_t r = 0; r < v.rows; ++r) std::memcpy(o.bytes.data() + size_t(r) * row, src + std::size_t(r * v.ld) * es, row);
    total += o.bytes.size();
    job.objects.push_back(std::move(o));
  }
  job.marker = m.dump();
  std::unique_lock<std::mutex> lock(mu_);
  stats_.copy_seconds += seconds_since(t0);
  if (!stats_.error.empty()) return;  // writing failed earlier: stop persisting
  // bounded memory: a task waits while the writer is far behind
  space_.wait(lock, [&] { return stop_ || queued_bytes_ == 0 || queued_bytes_ + total <= kQueueLimit; });
  queued_bytes_ += total;
  queue_.push_back(std::move(job));
  cv_.notify_one();
}

void Checkpoint::write_job(Job& job) {
  auto m = nlohmann::json::parse(job.marker);
  nlohmann::json outputs = nlohmann::json::array();
  std::int64_t bytes = 0;
  for (Object& o : job.objects) {
    o.content = Hash64().add(o.bytes.data(), o.bytes.size()).digest();
    unsigned char h[kHeader];
    std::memcpy(h, kMagic, 8);
    const std::uint64_t n = o.bytes.size();
    std::memcpy(h + 8, &o.version, 8);
    std::memcpy(h + 16, &o.content, 8);
    std::memcpy(h + 24, &n, 8);
    write_atomic(object_path(dir_, o.version), h, kHeader, o.bytes.data(), o.bytes.size());
    outputs.push_back({{"binding", o.binding}, {"version", hex64(o.version)}, {"content", hex64(o.content)}, {"bytes", n}});
    bytes += std::int64_t(n + kHeader);
  }
  m["outputs"] = outputs;
  const std::string text = m.dump() + "\n";
  write_atomic(marker_path(dir_, key_[size_t(job.task)]), nullptr, 0, text.data(), text.size());
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.tasks_persisted;
  stats_.bytes_written += bytes + std::int64_t(text.size());
}

void Checkpoint::writer_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    std::string err;
    std::size_t total = 0;
    for (const auto& o : job.objects) total += o.bytes.size();
    try {
      write_job(job);
    } catch (const std::exception& e) {
      err = e.what();
    }
    job.objects.clear();
    lock.lock();
    busy_ = false;
    stats_.write_seconds += seconds_since(t0);
    queued_bytes_ -= total;
    if (!err.empty() && stats_.error.empty()) {
      stats_.error = err;
      for (const auto& q : queue_)
        for (const auto& o : q.objects) queued_bytes_ -= o.bytes.size();
      queue_.clear();
    }
    space_.notify_all();
    cv_.notify_all();
  }
}

void Checkpoint::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

Checkpoint::Stats Checkpoint::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  if (!rerun_.empty()) s.tasks_rerun = planned_reruns();
  return s;
}

}  // namespace ymlopt
