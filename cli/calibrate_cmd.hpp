#pragma once
#include <string>
#include <vector>

#include "ymlopt/engine/perf_model.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {

/// `ymlopt calibrate [--quick] [--out FILE]`: measures this machine's kernel
/// rates (sgemm/dgemm, int8/int4 quant::linear, CSR/2:4 sparse::linear, one
/// thread), memory bandwidth, the components' rates on GPT-2-sized tasks and the
/// per-task overhead of each backend; stores them as JSON in calibration_path().
/// Each figure is the fastest of several timed batches (the slower ones measure
/// the machine's other users).
///
///   ymlopt calibrate            # ~30 s; `ymlopt run` then predicts with it
int cmd_calibrate(const std::vector<std::string>& args);

/// The measurements of cmd_calibrate (quick: fewer shapes and repetitions).
Calibration measure_calibration(bool quick);

/// Human-readable table of a calibration.
std::string format_calibration(const Calibration& c);

/// The calibration `ymlopt run` predicts with: this machine's stored one, else
/// builtin_calibration() (calibrated == false).
Calibration calibration_or_builtin();

}  // namespace ymlopt

namespace ymlopt {

/// `ymlopt run`'s prediction, made before the run: backend "starpu" runs on
/// `ncpu` workers (0: the calibrated StarPU worker count), "sequential" on one;
/// with this machine's task history when given.
///
///   History h = load_history();
///   Prediction p = predict_run(dag, "starpu", 0, &h);
///   info["prediction"] = prediction_report(p, makespan_us, allocated + mapped, peak_rss);
Prediction predict_run(const Dag& dag, const std::string& backend, int ncpu, const History* history = nullptr);

/// Seconds of each task of a finished run (by task id; -1 for tasks that did not run).
std::vector<double> task_seconds(const ExecResult& r);

/// report.json's "prediction": the Prediction plus the measured figures and the
/// ratios predicted / measured (time, DataStore memory, peak RSS). `time_cpu_adjusted`
/// divides the measured time by the share of `workers` cores the process got
/// (its CPU time so far / (wall time x workers), capped at 1): on a shared machine
/// that is the time the run would have taken alone. Call it right after the run;
/// peak_rss_bytes 0 means "not a process that ran only this DAG once" (optimize
/// --eval's medians): no CPU share then (0, and time_cpu_adjusted 0).
nlohmann::json prediction_report(const Prediction& p, double measured_us, double store_bytes, double peak_rss_bytes);

/// "predicted 12.3 ms, measured 11.0 ms (1.12x); memory predicted 500.1 MiB, allocated+mapped 500.1 MiB (1.000x)",
/// with " [uncalibrated (run ymlopt calibrate)]" when no calibration file exists.
std::string prediction_line(const nlohmann::json& report);

}  // namespace ymlopt
