// nn.sample: the next token from the last row of logits (transformer_internal.hpp).
// Greedy (temperature 0) or sampled as Hugging Face's generate does: logits /
// temperature, top-k, top-p (nucleus), min-p, then a draw from the softmax.
// The draw is a counter-based hash of (seed, tokens generated so far), so a
// run is reproducible whatever the backend, worker or restart.
#include "nn/transformer_internal.hpp"

#include <numeric>
#include <sstream>

namespace ymlopt::transformer {

const std::vector<PortSpec>& sample_ports() {
  static const std::vector<PortSpec> p = {
      {"logits", Access::read, kFloat, false, 2, "logits [rows, vocab]; the last row is sampled"},
      {"token", Access::write, {DType::i32}, false, 1, "the token drawn [1] (the next step's input)"},
      {"generated", Access::read_write, {DType::i32}, false, 2,
       "the tokens generated so far [max_new] (a batch: [sequences, max_new]); the new one goes to index count"},
      {"count", Access::read_write, {DType::i32}, false, 1, "how many tokens are in 'generated' [1]; incremented"},
      {"running", Access::write, {DType::i32}, false, 1,
       "1 while generation goes on, 0 once the token is an end token or 'generated' is full [1] (a batch: the "
       "sequences still going)"},
      {"alive", Access::read_write, {DType::i32}, true, 1,
       "a batch of sequences [sequences]: 1 while each goes on; then row s of logits, token, generated and count "
       "is sequence s's"},
  };
  return p;
}

namespace {

std::vector<std::int64_t> parse_ids(const std::string& text, std::string* err) {
  std::vector<std::int64_t> ids;
  std::stringstream ss(text);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    const auto b = tok.find_first_not_of(' '), e = tok.find_last_not_of(' ');
    if (b == std::string::npos) continue;
    tok = tok.substr(b, e - b + 1);
    char* end = nullptr;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (*end || v < 0) {
      if (err) *err = "param 'eos' holds '" + tok + "': expected token ids >= 0, separated by commas";
      return {};
    }
    ids.push_back(v);
  }
  return ids;
}

/// A uniform double in [0, 1) from (seed, step): splitmix64 of their mix.
double uniform(std::uint64_t seed, std::uint64_t step) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + step + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

template <class T> int64_t argmax(const T* l, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j)
    if (l[j] > l[best]) best = j;
  return best;
}

/// The sampled id: candidates by decreasing logit, cut by top-k, softmax at the
/// temperature, cut by top-p and min-p, then the draw u in [0, 1).
template <class T>
int64_t draw(const T* l, int64_t n, double temperature, int64_t top_k, double top_p, double min_p, double u) {
  std::vector<std::int32_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = top_k > 0 ? std::min(top_k, n) : n;
  auto by_logit = [l](std::int32_t a, std::int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), by_logit);
  idx.resize(static_cast<std::size_t>(k));
  std::sort(idx.begin(), idx.end(), by_logit);
  std::vector<double> w(idx.size());
  const double mx = double(l[idx[0]]);
  if (std::isinf(mx)) throw KernelError("every logit is -inf: no token can be drawn");
  double sum = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) sum += w[i] = std::exp((double(l[idx[i]]) - mx) / temperature);
  std::size_t keep = idx.size();
  if (top_p < 1) {  // the smallest prefix whose probability reaches top_p
    double acc = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) {
      acc += w[i] / sum;
      if (acc >= top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (min_p > 0)  // tokens below min_p times the top probability (w[0] / sum)
    while (keep > 1 && w[keep - 1] < min_p * w[0]) --keep;
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) total += w[i];
  double target = u * total, acc = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    acc += w[i];
    if (target < acc) return idx[i];
  }
  return idx[keep - 1];
}

}  // namespace

std::string sample_check(const TaskShape& t) {
  const auto& s = sample_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::float_dtype(s, p, 0); !m.empty()) return m;
  if (p[0].rows < 1 || p[0].cols < 1) return "port 'logits' is " + dims(p[0]) + ": no row to sample";
  const int64_t b = p[5].bound() ? p[5].rows * p[5].cols : 1;
  if (p[5].bound() && p[0].rows != b)
    return "port 'logits' is " + dims(p[0]) + " but 'alive' counts " + to_string(b) + " sequences (a row each)";
  for (std::size_t i : {std::size_t(1), std::size_t(3)})
    if (p[i].rows * p[i].cols != b) return "port '" + s[i].name + "' is " + dims(p[i]) + ": " + to_string(b) + " element(s), one per sequence";
  if (p[4].rows * p[4].cols != 1) return "port 'running' is " + dims(p[4]) + ": one element";
  if (p[2].rows * p[2].cols < b || (p[5].bound() && p[2].rows != b))
    return "port 'generated' is " + dims(p[2]) + ": room for one token at least" + (p[5].bound() ? " per sequence, a row each" : "");
  const double temp = a.get_float("temperature"), top_p = a.get_float("top_p"), min_p = a.get_float("min_p");
  if (!(temp >= 0) || !std::isfinite(temp))
    return "param 'temperature' is " + a.get("temperature").text + ": must be >= 0 (0: greedy)";
  if (a.get_int("top_k") < 0) return "param 'top_k' is " + a.get("top_k").text + ": must be >= 0 (0: every token)";
  if (!(top_p > 0 && top_p <= 1)) return "param 'top_p' is " + a.get("top_p").text + ": must be in (0, 1]";
  if (!(min_p >= 0 && min_p < 1)) return "param 'min_p' is " + a.get("min_p").text + ": must be in [0, 1)";
  std::string err;
  for (std::int64_t id : parse_ids(a.get_string("eos"), &err))
    if (id >= p[0].cols)
      return "param 'eos' names token " + to_string(id) + " but the vocabulary has " + to_string(p[0].cols);
  return err;
}

Cost sample_cost(const TaskShape& t) {
  if (t.ports.size() != sample_ports().size()) return {};
  Cost c;
  c.flops = 4 * double(t.ports[0].cols);
  c.bytes = double(t.ports[0].cols) * double(dtype_size(t.ports[0].dtype)) + 32;
  return c;
}

void sample_cpu(KernelContext& ctx) {
  kutil::validate(ctx, sample_ports(), sample_check);
  const TensorView &logits = ctx.port(0), &gen = ctx.port(2);
  auto* token = static_cast<std::int32_t*>(ctx.port(1).data);
  auto* count = static_cast<std::int32_t*>(ctx.port(3).data);
  auto* running = static_cast<std::int32_t*>(ctx.port(4).data);
  auto* alive = ctx.port(5).bound() ? static_cast<std::int32_t*>(ctx.port(5).data) : nullptr;
  const int64_t b = alive ? logits.rows : 1, n = logits.cols;
  const int64_t cap = alive ? gen.cols : gen.rows * gen.cols;
  const double temp = ctx.arg_float("temperature");
  const std::vector<std::int64_t> eos = parse_ids(ctx.arg_string("eos"), nullptr);
  *running = 0;
  for (int64_t s = 0; s < b; ++s) {
    if (alive && !alive[s]) continue;
    if (count[s] < 0 || count[s] >= cap)
      throw KernelError("port 'count' holds " + to_string(count[s]) + (alive ? " for sequence " + to_string(s) : "") +
                        " but 'generated' has room for " + to_string(cap));
    int64_t id = 0;
    kutil::dispatch_float(logits.dtype, [&](auto tg) {
      using T = typename decltype(tg)::type;
      const T* l = row<T>(logits, alive ? s : logits.rows - 1);
      for (int64_t j = 0; j < n; ++j)
        if (!std::isfinite(double(l[j])) && !(std::isinf(double(l[j])) && l[j] < 0))
          throw KernelError("the logits hold " + std::string(std::isnan(double(l[j])) ? "NaN" : "+inf") + " at token " +
                            to_string(j));
      if (temp == 0) id = argmax(l, n);
      else  // sequence s draws from seed + s: a batch of one draws as a lone sequence does
        id = draw(l, n, temp, ctx.arg_int("top_k"), ctx.arg_float("top_p"), ctx.arg_float("min_p"),
                  uniform(std::uint64_t(ctx.arg_int("seed")) + std::uint64_t(s), std::uint64_t(count[s])));
    });
    token[s] = std::int32_t(id);
    static_cast<std::int32_t*>(gen.data)[s * gen.ld * (alive ? 1 : 0) + count[s]] = std::int32_t(id);
    ++count[s];
    bool stop = count[s] >= cap;
    for (std::int64_t e : eos) stop = stop || e == id;
    if (alive) alive[s] = stop ? 0 : 1;
    if (!stop) ++*running;
  }
}

}  // namespace ymlopt::transformer
