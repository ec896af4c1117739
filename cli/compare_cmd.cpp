#include "compare_cmd.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "report.hpp"
#include "usage_error.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {
namespace {

/// A report that cannot be read: the message names the file; exit 1.
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One model's measurements in an --eval report.
struct Side {
  double weight_bytes = 0;
  double peak_bytes = 0;  // allocated + mapped
  double time_median_us = 0;
  double flops = 0;
};

/// The quality of the first output of a run (as `ymlopt optimize --eval` measured it).
struct Quality {
  std::string output;
  double relative_error = 0;
  double mean_cosine = 1;
  double top1_agreement = 1;
  std::optional<double> nn_agreement;
};

/// One compared run: what its report.json says, plus where it lands on the plot.
struct Run {
  std::string arg;     // as given on the command line
  std::string report;  // the report.json path
  std::string label;   // unique name on the plot and in the table
  std::string name;    // the run directory's name (the report's directory, when a file was given)
  std::string sequence, passes, model;
  nlohmann::json model_json;
  double weight_original = 0, weight_optimized = 0;
  bool eval = false;
  Side original, optimized;
  std::optional<Quality> quality;
  bool pareto = false;
};

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// Looks up a dotted key path ("original.time_median_us") and requires a number.
double number_at(const nlohmann::json& j, const std::string& path, const std::string& file) {
  const nlohmann::json* cur = &j;
  std::string::size_type start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(key))
      throw ReportError(file + ": missing '" + path + "' (not a report.json of 'ymlopt optimize'?)");
    cur = &(*cur)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!cur->is_number()) throw ReportError(file + ": '" + path + "' is not a number");
  return cur->get<double>();
}

std::string string_at(const nlohmann::json& j, const std::string& key, const std::string& file) {
  if (!j.contains(key)) throw ReportError(file + ": missing '" + key + "' (not a report.json of 'ymlopt optimize'?)");
  if (!j[key].is_string()) throw ReportError(file + ": '" + key + "' is not a string");
  return j[key].get<std::string>();
}

Side read_side(const nlohmann::json& r, const std::string& side, const std::string& file) {
  Side s;
  s.weight_bytes = number_at(r, side + ".weight_bytes", file);
  s.peak_bytes = number_at(r, side + ".allocated", file) + number_at(r, side + ".mapped", file);
  s.time_median_us = number_at(r, side + ".time_median_us", file);
  s.flops = number_at(r, side + ".flops", file);
  return s;
}

/// Reads DIR/report.json (or a report file given directly).
Run load_run(const std::string& arg) {
  Run run;
  run.arg = arg;
  const fs::path p(arg);
  std::error_code ec;
  const fs::path norm = p.lexically_normal();
  // "runs/int8/" normalizes to "runs/int8/" (an empty filename): take the parent's name
  const fs::path dir_path = norm.has_filename() ? norm : norm.parent_path();
  if (fs::is_regular_file(p, ec)) {
    run.report = p.string();
    run.name = fs::absolute(p, ec).parent_path().filename().string();
  } else if (fs::is_directory(p, ec)) {
    run.report = (p / "report.json").string();
    run.name = (dir_path.filename() == "." || dir_path.empty() ? fs::current_path(ec) : dir_path).filename().string();
  } else throw ReportError(arg + ": no such directory (expected the output directory of 'ymlopt optimize')");
  std::ifstream in(run.report, std::ios::binary);
  if (!in)
    throw ReportError(run.report + ": no such file (expected the output directory of 'ymlopt optimize -o DIR')");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json r;
  try {
    r = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number out of range
    throw ReportError(run.report + ": not valid JSON: " + e.what());
  }
  if (!r.is_object()) throw ReportError(run.report + ": expected a JSON object");
  const std::string& f = run.report;
  run.sequence = string_at(r, "sequence", f);
  run.passes = string_at(r, "passes", f);
  run.weight_original = number_at(r, "weight_bytes.original", f);
  run.weight_optimized = number_at(r, "weight_bytes.optimized", f);
  if (r.contains("model") && r["model"].is_object()) {
    run.model_json = r["model"];
    if (r["model"].contains("workflow") && r["model"]["workflow"].is_string())
      run.model = r["model"]["workflow"].get<std::string>();
  }
  run.eval = r.contains("original") || r.contains("optimized");
  if (run.eval) {
    run.original = read_side(r, "original", f);
    run.optimized = read_side(r, "optimized", f);
    if (r.contains("quality")) {
      const auto& q = r["quality"];
      if (!q.is_object()) throw ReportError(f + ": 'quality' is not an object");
      if (!q.empty()) {
        // the first output (keys are sorted, as every report writes them)
        const auto it = q.begin();
        Quality qual;
        qual.output = it.key();
        const std::string base = "quality." + it.key();
        // the output name may contain dots: look its fields up directly
        auto field = [&](const char* k) {
          if (!it->is_object() || !it->contains(k)) throw ReportError(f + ": missing '" + base + "." + k + "'");
          if (!(*it)[k].is_number()) throw ReportError(f + ": '" + base + "." + k + "' is not a number");
          return (*it)[k].get<double>();
        };
        qual.relative_error = field("relative_error");
        qual.mean_cosine = field("mean_cosine");
        qual.top1_agreement = field("top1_agreement");
        if (it->contains("nn_agreement")) qual.nn_agreement = field("nn_agreement");
        if (!(qual.relative_error >= 0) || !std::isfinite(qual.relative_error))
          throw ReportError(f + ": '" + base + ".relative_error' must be a finite value >= 0");
        run.quality = qual;
      }
    }
  }
  if (!(run.weight_original > 0)) throw ReportError(f + ": 'weight_bytes.original' must be > 0");
  return run;
}

/// Names shown on the plot: the sequence's name, or the pass list for runs made
/// with --passes (whose sequence is the generic "passes"); made unique with the
/// directory's name.
void assign_labels(std::vector<Run>& runs) {
  for (auto& r : runs) {
    r.label = (!r.sequence.empty() && r.sequence != "passes") ? r.sequence : r.passes;
    if (r.label.empty()) r.label = r.name;
  }
  std::map<std::string, int> count;
  for (const auto& r : runs) ++count[r.label];
  for (auto& r : runs)
    if (count[r.label] > 1) r.label += " (" + r.name + ")";
  std::set<std::string> seen;
  for (auto& r : runs) {
    std::string l = r.label;
    for (int k = 2; seen.count(l); ++k) l = r.label + " #" + std::to_string(k);
    r.label = l;
    seen.insert(l);
  }
}

bool plotted(const Run& r) { return r.eval && r.quality.has_value(); }

/// Marks the runs that no other point (the original at (1, 0) included) beats
/// in both weight bytes and relative error.
void mark_pareto(std::vector<Run>& runs) {
  struct Pt {
    double x, y;
  };
  std::vector<Pt> pts = {{1.0, 0.0}};
  for (const auto& r : runs)
    if (plotted(r)) pts.push_back({ratio(r.weight_optimized, r.weight_original), r.quality->relative_error});
  for (auto& r : runs) {
    if (!plotted(r)) continue;
    const double x = ratio(r.weight_optimized, r.weight_original), y = r.quality->relative_error;
    bool dominated = false;
    for (const auto& q : pts)
      if (q.x <= x && q.y <= y && (q.x < x || q.y < y)) dominated = true;
    r.pareto = !dominated;
  }
}

/// False when a run is exact (relative error 0) with fewer bytes than the original.
bool original_on_front(const std::vector<Run>& runs) {
  for (const auto& r : runs)
    if (plotted(r) && r.quality->relative_error <= 0 && ratio(r.weight_optimized, r.weight_original) < 1.0)
      return false;
  return true;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string human_bytes(double b) {
  if (b >= double(1 << 30)) return fmt("%.2f GiB", b / double(1 << 30));
  if (b >= double(1 << 20)) return fmt("%.2f MiB", b / double(1 << 20));
  if (b >= double(1 << 10)) return fmt("%.2f KiB", b / double(1 << 10));
  return fmt("%.0f B", b);
}

std::string xratio(double num, double den) { return den > 0 ? fmt("%.3fx", num / den) : std::string("-"); }

std::string md_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|' || c == '\\') o += '\\';
    if (c == '\n') o += ' ';
    else o += c;
  }
  return o;
}

// Text inside a `code span`: no backticks, and pipes would still split the table cell.
std::string code_span(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '`' ? '\'' : c == '|' ? '/' : c == '\n' ? ' ' : c;
  return o;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        // control characters other than tab/newline are not allowed in XML 1.0
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') o += ' ';
        else o += c;
    }
  }
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The original model, when every run optimized the same one.
struct Original {
  bool same_model = true;
  double weight_bytes = 0;
  bool eval = false;
  Side side;  // peak and flops of the first eval run; time: median over the runs' own measurements
};

Original summarize_original(const std::vector<Run>& runs) {
  Original o;
  o.weight_bytes = runs.front().weight_original;
  std::vector<double> times;
  for (const auto& r : runs) {
    if (r.weight_original != o.weight_bytes || r.model_json != runs.front().model_json) o.same_model = false;
    if (!r.eval) continue;
    if (!o.eval) o.side = r.original, o.eval = true;
    times.push_back(r.original.time_median_us);
  }
  o.side.time_median_us = median(times);
  return o;
}

std::string markdown(const std::vector<Run>& runs, const Original& orig) {
  std::ostringstream o;
  o << "# ymlopt compare: " << runs.size() << " run" << (runs.size() == 1 ? "" : "s") << "\n\n";
  std::set<std::string> models, outputs;
  for (const auto& r : runs) {
    models.insert(r.model.empty() ? "?" : r.model);
    if (r.quality) outputs.insert(r.quality->output);
  }
  o << "model" << (models.size() == 1 ? "" : "s") << ":";
  for (const auto& m : models) o << " `" << m << "`";
  o << "\n\n";
  if (!orig.same_model)
    o << "note: the runs optimized different models (or the same one with other settings); every ratio is to "
         "the run's own original.\n\n";
  o << "Ratios are optimized / original, each measured in the same run. Quality is that of the first output (";
  bool first = true;
  for (const auto& k : outputs) o << (first ? "" : ", ") << "`" << md_escape(k) << "`", first = false;
  if (outputs.empty()) o << "none measured";
  o << "): relative error ||y - y0|| / ||y0||, mean cosine over rows, top-1 agreement over rows, "
       "nearest-neighbour agreement between rows. Pareto: no other run (nor the original) has both fewer weight "
       "bytes and a smaller relative error.\n\n";
  o << "| run | sequence | passes | weight bytes | peak memory (allocated + mapped) | time (median) | GFLOP | "
       "relative error | mean cosine | top-1 | nn | Pareto |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  if (orig.same_model) {
    o << "| original | - | - | " << human_bytes(orig.weight_bytes) << " (1.000x) | ";
    if (orig.eval)
      o << human_bytes(orig.side.peak_bytes) << " (1.000x) | " << fmt("%.3f ms", orig.side.time_median_us / 1e3)
        << " (1.000x) | " << fmt("%.4f", orig.side.flops / 1e9) << " (1.000x) | 0 | 1 | 1 | 1 | ";
    else
      o << "- | - | - | - | - | - | - | ";
    o << (original_on_front(runs) ? "yes" : "no") << " |\n";
  }
  for (const auto& r : runs) {
    o << "| " << md_escape(r.label) << " | " << md_escape(r.sequence) << " | `" << code_span(r.passes) << "` | "
      << human_bytes(r.weight_optimized) << " (" << xratio(r.weight_optimized, r.weight_original) << ") | ";
    if (r.eval) {
      o << human_bytes(r.optimized.peak_bytes) << " (" << xratio(r.optimized.peak_bytes, r.original.peak_bytes)
        << ") | " << fmt("%.3f ms", r.optimized.time_median_us / 1e3) << " ("
        << xratio(r.optimized.time_median_us, r.original.time_median_us) << ") | "
        << fmt("%.4f", r.optimized.flops / 1e9) << " (" << xratio(r.optimized.flops, r.original.flops) << ") | ";
    } else {
      o << "- | - | - | ";
    }
    if (r.quality) {
      const auto& q = *r.quality;
      o << fmt("%.4g", q.relative_error) << " | " << fmt("%.6f", q.mean_cosine) << " | "
        << fmt("%.4f", q.top1_agreement) << " | " << (q.nn_agreement ? fmt("%.4f", *q.nn_agreement) : "-") << " | "
        << (r.pareto ? "yes" : "no") << " |\n";
    } else {
      o << "- | - | - | - | " << (r.eval ? "no quality data" : "no --eval") << " |\n";
    }
  }
  if (orig.same_model && orig.eval) {
    o << "\nThe original's time is the median of the " << "runs' own measurements of it ("
      << fmt("%.3f ms", orig.side.time_median_us / 1e3) << ").\n";
  }
  return o.str();
}

nlohmann::json to_json(const std::vector<Run>& runs, const Original& orig) {
  auto triple = [](double a, double b) {
    return nlohmann::json{{"original", a}, {"optimized", b}, {"ratio", ratio(b, a)}};
  };
  nlohmann::json out = {{"quality_metric", "relative_error"}, {"runs", nlohmann::json::array()}};
  if (orig.same_model) {
    nlohmann::json o = {{"weight_bytes", orig.weight_bytes}, {"pareto", original_on_front(runs)}};
    if (orig.eval)
      o.update({{"peak_bytes", orig.side.peak_bytes},
                {"time_median_us", orig.side.time_median_us},
                {"flops", orig.side.flops}});
    out["original"] = o;
  } else {
    out["original"] = nullptr;
  }
  for (const auto& r : runs) {
    nlohmann::json j = {{"label", r.label},   {"dir", r.arg},         {"report", r.report}, {"sequence", r.sequence},
                        {"passes", r.passes}, {"model", r.model_json}, {"eval", r.eval},
                        {"weight_bytes", triple(r.weight_original, r.weight_optimized)}};
    if (r.eval) {
      j["peak_bytes"] = triple(r.original.peak_bytes, r.optimized.peak_bytes);
      j["time_median_us"] = triple(r.original.time_median_us, r.optimized.time_median_us);
      j["flops"] = triple(r.original.flops, r.optimized.flops);
    }
    if (r.quality) {
      const auto& q = *r.quality;
      j["quality"] = {{"output", q.output},
                      {"relative_error", q.relative_error},
                      {"mean_cosine", q.mean_cosine},
                      {"top1_agreement", q.top1_agreement},
                      {"nn_agreement", q.nn_agreement ? nlohmann::json(*q.nn_agreement) : nlohmann::json(nullptr)}};
      j["pareto"] = r.pareto;
    } else {
      j["quality"] = nullptr;
    }
    out["runs"].push_back(j);
  }
  return out;
}

// ---- the SVG plot --------------------------------------------------------

/// Colour bins for the time ratio (optimized / original).
struct TimeBin {
  double upper;  // ratio < upper
  const char* colour;
  const char* text;
};
constexpr TimeBin kTimeBins[] = {{0.8, "#1a9850", "faster (< 0.8x)"},
                                 {1.25, "#4575b4", "about the same (0.8-1.25x)"},
                                 {2.0, "#f46d43", "slower (1.25-2x)"},
                                 {1e300, "#a50026", "much slower (>= 2x)"}};
constexpr const char* kNoTimeColour = "#999999";

const char* time_colour(double r) {
  if (!(r > 0)) return kNoTimeColour;
  for (const auto& b : kTimeBins)
    if (r < b.upper) return b.colour;
  return kTimeBins[3].colour;
}

/// A nice tick step for a linear axis [0, hi] with at most ~10 ticks.
double tick_step(double hi) {
  for (double s : {0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0})
    if (hi / s <= 10) return s;
  return std::pow(10.0, std::ceil(std::log10(hi / 10)));
}

// The plot of `ymlopt compare`: weight bytes (linear x) against relative error
// (log y), points coloured by time ratio, the Pareto front, labels that dodge
// each other, a legend. One method per layer of the drawing.
class SvgPlot {
 public:
  explicit SvgPlot(const std::vector<Run>& runs) : runs_(runs) {
    double emin = 0, emax = 0;
    for (const auto& r : runs) {
      if (!plotted(r)) continue;
      pts_.push_back(&r);
      xmax_ = std::max(xmax_, ratio(r.weight_optimized, r.weight_original));
      const double e = r.quality->relative_error;
      if (e > 0) {
        emin = emin > 0 ? std::min(emin, e) : e;
        emax = std::max(emax, e);
      }
    }
    xmax_ *= 1.08;
    if (emin > 0) {
      dlo_ = int(std::floor(std::log10(emin)));
      dhi_ = int(std::ceil(std::log10(emax)));
      if (dhi_ <= dlo_) dhi_ = dlo_ + 1;
    }
    for (const auto* r : pts_)
      if (output_.empty()) output_ = r->quality->output;
      else if (output_ != r->quality->output) output_ = "first output";
  }

  std::string draw() {
    s_ << "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
       << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << kW << "\" height=\"" << kH
       << "\" viewBox=\"0 0 " << kW << " " << kH << "\">\n"
       << "<title>ymlopt compare: output quality vs weight bytes vs time</title>\n"
       << "<rect x=\"0\" y=\"0\" width=\"" << kW << "\" height=\"" << kH << "\" fill=\"white\"/>\n"
       << "<g font-family=\"sans-serif\" font-size=\"12\" fill=\"black\">\n"
       << "<text x=\"" << kW / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Output quality vs weight bytes "
       << "(colour: time ratio)</text>\n";
    axes();
    pareto_front();
    points();
    legend();
    s_ << "</g>\n</svg>\n";
    return s_.str();
  }

 private:
  static constexpr double kW = 840, kH = 520, kL = 90, kR = 560, kT = 56, kB = 440;
  static constexpr double kExactY = kB - 14;      // where relative error 0 is drawn
  static constexpr double kLogBottom = kB - 48;   // the log axis' lowest decade
  struct Box {
    double x0, y0, x1, y1;
  };

  static std::string num(double v) { return fmt("%.1f", v); }
  double sx(double x) const { return kL + (kR - kL) * x / xmax_; }
  double sy(double e) const {
    if (!(e > 0)) return kExactY;
    return kLogBottom - (kLogBottom - kT) * (std::log10(e) - dlo_) / double(dhi_ - dlo_);
  }

  // frame, grid, tick labels, the exact-error line, the 1x line, axis titles
  void axes() {
    s_ << "<rect x=\"" << kL << "\" y=\"" << kT << "\" width=\"" << kR - kL << "\" height=\"" << kB - kT
       << "\" fill=\"none\" stroke=\"black\"/>\n";
    const double step = tick_step(xmax_);
    for (int k = 0; k * step <= xmax_ + 1e-12; ++k) {
      const double x = sx(k * step);
      s_ << "<line x1=\"" << num(x) << "\" y1=\"" << kT << "\" x2=\"" << num(x) << "\" y2=\"" << kB
         << "\" stroke=\"#dddddd\"/>\n"
         << "<text x=\"" << num(x) << "\" y=\"" << kB + 16 << "\" text-anchor=\"middle\">" << fmt("%g", k * step)
         << "</text>\n";
    }
    for (int d = dlo_; d <= dhi_; ++d) {
      const double y = sy(std::pow(10.0, d));
      s_ << "<line x1=\"" << kL << "\" y1=\"" << num(y) << "\" x2=\"" << kR << "\" y2=\"" << num(y)
         << "\" stroke=\"#dddddd\"/>\n"
         << "<text x=\"" << kL - 6 << "\" y=\"" << num(y + 4) << "\" text-anchor=\"end\">1e" << d << "</text>\n";
    }
    s_ << "<line x1=\"" << kL << "\" y1=\"" << kExactY << "\" x2=\"" << kR << "\" y2=\"" << kExactY
       << "\" stroke=\"#bbbbbb\" stroke-dasharray=\"4 3\"/>\n"
       << "<text x=\"" << kL - 6 << "\" y=\"" << kExactY + 4 << "\" text-anchor=\"end\">0 (exact)</text>\n";
    s_ << "<line x1=\"" << num(sx(1)) << "\" y1=\"" << kT << "\" x2=\"" << num(sx(1)) << "\" y2=\"" << kB
       << "\" stroke=\"#888888\" stroke-dasharray=\"2 3\"/>\n";
    s_ << "<text x=\"" << (kL + kR) / 2 << "\" y=\"" << kB + 36
       << "\" text-anchor=\"middle\">weight bytes / original (linear axis; left is smaller)</text>\n"
       << "<text transform=\"translate(22 " << (kT + kB) / 2 << ") rotate(-90)\" text-anchor=\"middle\">relative error of "
       << xml_escape(output_.empty() ? "the first output" : output_) << " (log axis; lower is better)</text>\n";
  }

  // the Pareto front, original included, by increasing bytes
  void pareto_front() {
    std::vector<std::pair<double, double>> front;
    if (original_on_front(runs_)) front.emplace_back(sx(1.0), kExactY);
    for (const auto* r : pts_)
      if (r->pareto) front.emplace_back(sx(ratio(r->weight_optimized, r->weight_original)), sy(r->quality->relative_error));
    std::sort(front.begin(), front.end());
    if (front.size() > 1) {
      s_ << "<polyline fill=\"none\" stroke=\"#444444\" stroke-width=\"1.5\" points=\"";
      for (const auto& [x, y] : front) s_ << num(x) << "," << num(y) << " ";
      s_ << "\"/>\n";
    }
  }

  bool overlaps(const Box& b) const {
    if (b.x0 < kL || b.x1 > kR || b.y0 < kT || b.y1 > kB) return true;
    for (const auto& t : taken_)
      if (b.x0 < t.x1 && t.x0 < b.x1 && b.y0 < t.y1 && t.y0 < b.y1) return true;
    return false;
  }

  // a label beside the point (x, y), at the first place that overlaps nothing drawn
  void place_label(double x, double y, const std::string& text, const char* extra) {
    const double w = 6.6 * double(text.size()), h = 12;
    struct Cand {
      double dx, dy;
      bool left;
    };
    const Cand cands[] = {{8, -6, false},  {8, 14, false},  {-8, -6, true},  {-8, 14, true},
                          {8, -20, false}, {8, 28, false},  {-8, -20, true}, {-8, 28, true},
                          {8, -34, false}, {-8, -34, true}, {8, 42, false},  {-8, 42, true}};
    Cand pick = cands[0];
    Box box{};
    bool found = false;
    for (const auto& c : cands) {
      const double tx = x + c.dx, ty = y + c.dy;
      const Box b = c.left ? Box{tx - w, ty - h + 2, tx, ty + 2} : Box{tx, ty - h + 2, tx + w, ty + 2};
      if (!overlaps(b)) {
        pick = c, box = b, found = true;
        break;
      }
    }
    if (!found) {
      pick = x + 8 + w > kR ? cands[2] : cands[0];
      const double tx = x + pick.dx, ty = y + pick.dy;
      box = pick.left ? Box{tx - w, ty - h + 2, tx, ty + 2} : Box{tx, ty - h + 2, tx + w, ty + 2};
    }
    taken_.push_back(box);
    s_ << "<text x=\"" << num(x + pick.dx) << "\" y=\"" << num(y + pick.dy) << "\""
       << (pick.left ? " text-anchor=\"end\"" : "") << extra << ">" << xml_escape(text) << "</text>\n";
  }

  // points and labels; labels dodge each other and the points
  void points() {
    // reserve the markers first so labels avoid all of them
    taken_.push_back({sx(1) - 6, kExactY - 6, sx(1) + 6, kExactY + 6});
    for (const auto* r : pts_) {
      const double x = sx(ratio(r->weight_optimized, r->weight_original)), y = sy(r->quality->relative_error);
      taken_.push_back({x - 6, y - 6, x + 6, y + 6});
    }
    s_ << "<g><title>original: weight bytes 1x, relative error 0</title><path d=\"M " << num(sx(1)) << " "
       << num(kExactY - 7) << " l 7 7 l -7 7 l -7 -7 z\" fill=\"black\"/></g>\n";
    place_label(sx(1), kExactY, "original", " font-weight=\"bold\"");
    for (const auto* r : pts_) {
      const double bx = ratio(r->weight_optimized, r->weight_original);
      const double tr = ratio(r->optimized.time_median_us, r->original.time_median_us);
      const double x = sx(bx), y = sy(r->quality->relative_error);
      s_ << "<g><title>" << xml_escape(r->label) << ": weight bytes " << fmt("%.3fx", bx) << ", relative error "
         << fmt("%.4g", r->quality->relative_error) << ", mean cosine " << fmt("%.6f", r->quality->mean_cosine)
         << ", time " << (tr > 0 ? fmt("%.3fx", tr) : std::string("not measured")) << "</title><circle cx=\"" << num(x)
         << "\" cy=\"" << num(y) << "\" r=\"6\" fill=\"" << time_colour(tr) << "\" stroke=\""
         << (r->pareto ? "black" : "white") << "\" stroke-width=\"1.5\"/></g>\n";
      place_label(x, y, r->label, "");
    }
  }

  // the colours, the original's marker, the front, and the runs not plotted
  void legend() {
    double ly = kT + 4;
    const double lx = kR + 24;
    s_ << "<text x=\"" << lx << "\" y=\"" << ly + 8 << "\" font-weight=\"bold\">time ratio (optimized / original)</text>\n";
    ly += 24;
    for (const auto& b : kTimeBins) {
      s_ << "<circle cx=\"" << lx + 6 << "\" cy=\"" << ly << "\" r=\"6\" fill=\"" << b.colour << "\"/>\n"
         << "<text x=\"" << lx + 18 << "\" y=\"" << ly + 4 << "\">" << xml_escape(b.text) << "</text>\n";
      ly += 20;
    }
    s_ << "<circle cx=\"" << lx + 6 << "\" cy=\"" << ly << "\" r=\"6\" fill=\"" << kNoTimeColour << "\"/>\n"
       << "<text x=\"" << lx + 18 << "\" y=\"" << ly + 4 << "\">not measured</text>\n";
    ly += 28;
    s_ << "<path d=\"M " << lx + 6 << " " << ly - 7 << " l 7 7 l -7 7 l -7 -7 z\" fill=\"black\"/>\n"
       << "<text x=\"" << lx + 18 << "\" y=\"" << ly + 4 << "\">original (1x bytes, exact)</text>\n";
    ly += 22;
    s_ << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 14 << "\" y2=\"" << ly
       << "\" stroke=\"#444444\" stroke-width=\"1.5\"/>\n"
       << "<text x=\"" << lx + 18 << "\" y=\"" << ly + 4 << "\">Pareto front (fewer bytes and</text>\n"
       << "<text x=\"" << lx + 18 << "\" y=\"" << ly + 18 << "\">lower error; black outline)</text>\n";
    ly += 40;
    std::vector<const Run*> missing;
    for (const auto& r : runs_)
      if (!plotted(r)) missing.push_back(&r);
    if (!missing.empty()) {
      s_ << "<text x=\"" << lx << "\" y=\"" << ly << "\" font-weight=\"bold\">not plotted (no --eval quality):</text>\n";
      for (const auto* r : missing) {
        ly += 16;
        s_ << "<text x=\"" << lx << "\" y=\"" << ly << "\">" << xml_escape(r->label) << " ("
           << fmt("%.3fx", ratio(r->weight_optimized, r->weight_original)) << " bytes)</text>\n";
      }
    }
  }

  const std::vector<Run>& runs_;
  std::vector<const Run*> pts_;
  double xmax_ = 1.0;
  int dlo_ = -6, dhi_ = 0;
  std::string output_;  // the output the errors are of
  std::vector<Box> taken_;
  std::ostringstream s_;
};

std::string svg_plot(const std::vector<Run>& runs) { return SvgPlot(runs).draw(); }

}  // namespace

int cmd_compare(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  std::string prefix = "compare";
  po::options_description d("ymlopt compare DIR... [-o OUT_PREFIX]");
  d.add_options()("help,h", "show this help")(
      "out,o", po::value(&prefix),
      "write OUT_PREFIX.md, OUT_PREFIX.svg and OUT_PREFIX.json (default: compare in the current directory)");
  po::options_description all = d;
  all.add_options()("dir", po::value(&dirs), "output directories of 'ymlopt optimize' (or their report.json)");
  po::positional_options_description pos;
  pos.add("dir", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("compare: ") + e.what());
  }
  if (vm.count("help")) {
    std::cout << d << "\nDIR: the output directory of 'ymlopt optimize ... --eval -o DIR' (its report.json)\n";
    return 0;
  }
  if (dirs.empty()) throw UsageError("compare: expected at least one run directory (made by 'ymlopt optimize -o DIR')");
  if (prefix.empty()) throw UsageError("compare: --out must not be empty");

  std::vector<Run> runs;
  try {
    for (const auto& dir : dirs) runs.push_back(load_run(dir));
  } catch (const ReportError& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return 1;
  }
  assign_labels(runs);
  mark_pareto(runs);
  const Original orig = summarize_original(runs);
  if (!orig.same_model)
    std::cerr << "ymlopt: warning: the runs optimized different models or settings; ratios are each to the run's "
                 "own original\n";

  const std::string md = markdown(runs, orig);
  const fs::path parent = fs::path(prefix).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) {
      std::cerr << "ymlopt: error: cannot create '" << parent.string() << "': " << ec.message() << "\n";
      return 1;
    }
  }
  write_file_atomic(prefix + ".md", md);
  write_file_atomic(prefix + ".svg", svg_plot(runs));
  write_file_atomic(prefix + ".json", to_json(runs, orig).dump(1) + "\n");
  std::cout << md << "\nwritten: " << prefix << ".md, " << prefix << ".svg, " << prefix << ".json\n";
  return 0;
}

}  // namespace ymlopt
