//===- Profile.cpp - A session's kernel times, table and trace ------------===//

#include "Profile.h"
#include "Internal.h"

#include <fmt/format.h>

using namespace tfm::runtime;

namespace {

/// A JSON string's contents.
std::string jsonEscaped(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", c);
    else
      out += c;
  }
  return out;
}

} // namespace

std::unique_ptr<Profile> tfm::runtime::makeProfile(const tfm_abi_model_t &model,
                                                   bool printAtRelease) {
  auto profile = std::make_unique<Profile>();
  Profile &p = *profile;
  p.printAtRelease = printAtRelease;
  const char *const *origins = kernelOrigins(&model);
  for (int32_t i = 0; i < model.num_kernels; ++i) {
    std::string params;
    for (int j = 0; j < TFM_KERNEL_MAX_PARAMS; ++j)
      params += (j ? "," : "") + std::to_string(model.kernels[i].params[j]);
    p.rows.push_back(
        {kernelName(model.kernels[i].kind), params, origins ? origins[i] : ""});
  }
  const char *const *deviceOrigins = deviceKernelOrigins(&model);
  for (int32_t i = 0; i < model.num_device_kernels; ++i)
    p.rows.push_back(
        {model.device_kernels[i], "", deviceOrigins ? deviceOrigins[i] : ""});
  p.kernelMs.assign(p.rows.size(), 0.0);
  p.kernelCalls.assign(p.rows.size(), 0);
  return profile;
}

std::string tfm::runtime::describeKernels(const Device &device,
                                          const tfm_abi_model_t &m) {
  std::string text = device.name();
  int32_t declined = 0, first = -1;
  for (int32_t i = 0; i < m.num_kernels; ++i)
    if (device.declined(i) && declined++ == 0)
      first = i;
  int32_t taken = m.num_kernels - declined;
  auto kernels = [](int32_t n) {
    return fmt::format("{} kernel{}", n, n == 1 ? "" : "s");
  };
  if (taken > 0)
    text += fmt::format("; {} in {}", kernels(taken), device.kernelLibrary());
  if (declined > 0)
    text += fmt::format("{} {} in the model's code: {}", taken ? "," : ";",
                        kernels(declined), device.declineReason(first));
  return text;
}

void tfm::runtime::printProfile(const tfm_session_s &s, std::FILE *out) {
  const Profile &p = *s.profile;
  if (p.runs == 0) {
    std::fprintf(out, "tfm profile of '%s': no runs\n", s.module->path.c_str());
    return;
  }
  // The steady runs, or the first alone when it is all there is.
  bool firstOnly = p.runs == 1;
  int64_t runs = firstOnly ? 1 : p.runs - 1;
  double total = (firstOnly ? p.firstMs : p.totalMs) / runs;
  const std::vector<double> &kernelMs =
      firstOnly ? p.firstKernelMs : p.kernelMs;
  const std::vector<int64_t> &kernelCalls =
      firstOnly ? p.firstKernelCalls : p.kernelCalls;
  if (firstOnly)
    std::fprintf(out,
                 "tfm profile of '%s': 1 run, %.3f ms, the first: it creates "
                 "kernels and packs weights, so run more for the steady "
                 "state\n",
                 s.module->path.c_str(), total);
  else
    std::fprintf(out,
                 "tfm profile of '%s': %lld runs, %.3f ms per run (the "
                 "first run, %.3f ms, left out)\n",
                 s.module->path.c_str(), static_cast<long long>(runs), total,
                 p.firstMs);
  std::fprintf(out, "  on %s\n", s.description.c_str());
  std::fprintf(out, "  %-4s %-15s %-40s %8s %10s %6s  %s\n", "#", "kernel",
               "params", "calls/run", "ms/run", "%", "from");
  double kernels = 0;
  for (size_t i = 0; i < kernelMs.size(); ++i) {
    const Profile::Row &row = p.rows[i];
    double ms = kernelMs[i] / runs;
    kernels += ms;
    std::fprintf(out, "  %-4zu %-15s %-40s %8.1f %10.3f %6.1f", i,
                 row.kind.c_str(), row.params.c_str(),
                 double(kernelCalls[i]) / runs, ms, 100.0 * ms / total);
    // The origin last: it can be long (a descriptor shared by layers).
    if (!row.origin.empty())
      std::fprintf(out, "  %s", row.origin.c_str());
    std::fputc('\n', out);
  }
  double glue = total - kernels;
  std::fprintf(out, "  generated code (glue): %.3f ms/run (%.1f%%)\n", glue,
               100.0 * glue / total);
}

void tfm::runtime::writeTrace(const tfm_session_s &s, std::FILE *out) {
  const Profile &p = *s.profile;
  std::fprintf(out,
               "{\"displayTimeUnit\": \"ms\", \"otherData\": "
               "{\"model\": \"%s\", \"device\": \"%s\", "
               "\"kernels\": \"%s\"},\n"
               "\"traceEvents\": [",
               jsonEscaped(s.module->path).c_str(),
               jsonEscaped(s.deviceName).c_str(),
               jsonEscaped(s.description).c_str());
  bool first = true;
  for (const Profile::Event &e : p.events) {
    std::string name, args;
    if (e.kernel < 0) {
      name = std::string("run ") + e.entry;
    } else {
      const Profile::Row &row = p.rows[static_cast<size_t>(e.kernel)];
      name = row.kind;
      args = fmt::format(", \"args\": {{\"kernel\": {}, \"params\": "
                         "\"{}\", \"from\": \"{}\"}}",
                         e.kernel, jsonEscaped(row.params),
                         jsonEscaped(row.origin));
    }
    std::fprintf(out,
                 "%s\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": "
                 "\"X\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, "
                 "\"dur\": %.3f%s}",
                 first ? "" : ",", jsonEscaped(name).c_str(),
                 e.kernel < 0 ? "run" : "kernel", e.startUs, e.durationUs,
                 args.c_str());
    first = false;
  }
  std::fprintf(out, "\n]}\n");
}
