#include "compiler/offload/plan.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "compiler/offload/flag_table.hpp"
#include "util/fs.hpp"

namespace kache::compiler::offload {

namespace {

constexpr std::string_view kHip = "hip";    // the languages the offload route compiles
constexpr std::string_view kCuda = "cuda";  // clang's CUDA mode (Driver::clang only)

std::string suffix_of(const std::string& path) {
  const std::string base = util::basename(path);
  const auto dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? "" : base.substr(dot + 1);
}

// The offload rows, matched before the gcc table's, collecting what is the offload route's own.
class OffloadRows final : public gcc::PlanExtension {
 public:
  OffloadRows(Driver driver, OffloadPlan& out) : driver_(driver), out_(out) {}

  std::optional<Consumed> scan(const std::vector<std::string>& args, std::size_t i) override {
    if (args[i] == "-c") compile_given = true;  // and left to the gcc table
    const auto m = match_row(offload_rows(driver_ == Driver::hipcc), args[i]);
    if (!m) return std::nullopt;
    const bool needs_value = (m->row->forms & (kEquals | kSeparate)) != 0;
    if (needs_value && !m->value && !(m->row->forms & kSeparate)) return std::nullopt;  // "--offload-arch" alone
    if (m->form == kWhole || (!needs_value && m->value)) return std::nullopt;
    if (m->row->effect == Effect::Mllvm) return mllvm(args, i);
    if (m->row->effect == Effect::Xclang) return xclang(args, i);
    if (m->row->name == "--offload-arch") offload_arch_given = true;
    if (m->row->name == "--no-gpu-bundle-output") no_bundle_output = true;
    if (m->row->name == "--gpu-bundle-output") no_bundle_output = false;
    apply(m->row->effect, std::string(m->value.value_or("")));
    return Consumed{i, std::nullopt};
  }

  // --genco, and device-only without -c: clang links the device code into the same offload bundle as
  // with -c (measured with clang 15: byte-identical), not a host link. -S stops before any link.
  bool compiles() const override { return out_.genco || out_.assemble || out_.mode == DeviceMode::device_only; }

  std::string language(const std::string& source, const std::string& x_language,
                       const std::string& suffix_language) const override {
    if (x_language == "hip") return "hip";
    // clang's CUDA mode: -x cuda, or a .cu source without -x (hipcc takes both as HIP, below).
    if (driver_ == Driver::clang && (x_language == "cuda" || (x_language.empty() && suffix_language == "cuda"))) {
      return std::string(kCuda);
    }
    if (!x_language.empty()) return "";
    const std::string suffix = suffix_of(source);
    if (suffix == "hip") return "hip";
    // hipcc: .cpp/.cxx/.cc/.C/.cu/.cuh compile as HIP (hipcc.pl, HIP_COMPILE_CXX_AS_HIP unset or 1; the
    // adapter keys that variable); its other C++ suffixes (.c++, .cp, .CPP) reach clang as C++.
    static const std::set<std::string> kHipccHipSuffixes = {"cpp", "cxx", "cc", "C", "cu", "cuh"};
    if (driver_ == Driver::hipcc && (suffix_language == "c++" || suffix_language == "cuda") &&
        kHipccHipSuffixes.contains(suffix)) {
      return "hip";
    }
    return "";
  }

  // The targets as clang 15 builds them: a set (sorted, each once), --no-offload-arch taking out.
  std::set<std::string> targets;
  std::optional<Passthrough> target_refusal;
  // hipcc's own scan (hipcc.pl) knows only --offload-arch= (and --amdgpu-target=, not in the table):
  // without it hipcc adds rocm_agent_enumerator's GPUs to clang's line, whatever --cuda-gpu-arch= says.
  bool offload_arch_given = false;
  bool no_bundle_output = false;  // --no-gpu-bundle-output, the last of the pair winning
  bool compile_given = false;     // -c

 private:
  void apply(Effect e, const std::string& value) {
    switch (e) {
      case Effect::Arch:
        // The machine's GPU (rocm_agent_enumerator, amdgpu-arch): one key, code for whatever GPU is in.
        if (value == "native") {
          target_refusal = Passthrough{"offload-target-machine", "--offload-arch=native"};
        } else if (!target_processor(value) && !cuda_target(value)) {
          target_refusal = Passthrough{"offload-target", value};
        }
        targets.insert(value);
        break;
      case Effect::NoArch:
        if (value == "all") {
          targets.clear();
        } else {
          targets.erase(value);
        }
        break;
      case Effect::DeviceOnly: out_.mode = DeviceMode::device_only; break;
      case Effect::HostOnly: out_.mode = DeviceMode::host_only; break;
      case Effect::Genco: out_.genco = true; break;
      case Effect::Assemble: out_.assemble = true; break;
      case Effect::Rdc: out_.rdc = true; break;
      case Effect::NoRdc: out_.rdc = false; break;
      case Effect::RocmPath: out_.rocm_path = value; break;
      case Effect::HipPath: out_.hip_path = value; break;
      case Effect::DeviceLibPath: out_.device_lib_path = value; break;
      // The last one decides; an empty one is none (clang then hashes the line).
      case Effect::Cuid: out_.explicit_cuid = !value.empty(); break;
      case Effect::UseCuid: out_.use_cuid = value; break;
      case Effect::Keyed:
      case Effect::Mllvm:
      case Effect::Xclang: break;
    }
  }

  // -mllvm V: the AMDGPU backend's options (hipcc passes -amdgpu-early-inline-all, -amdgpu-function-
  // calls) choose code only; any other LLVM option may write a file (-info-output-file) or read one.
  std::optional<Consumed> mllvm(const std::vector<std::string>& args, std::size_t i) const {
    if (i + 1 >= args.size()) return std::nullopt;
    if (!args[i + 1].starts_with("-amdgpu-")) return Consumed{i + 1, Passthrough{"hidden-input", "-mllvm " + args[i + 1]}};
    return Consumed{i + 1, std::nullopt};
  }

  // -Xclang -dependency-file -Xclang D and -Xclang -MT -Xclang T: spec 003's depfile form, read as a
  // pair of pairs. Any other -Xclang is left to the gcc table, which refuses it.
  std::optional<Consumed> xclang(const std::vector<std::string>& args, std::size_t i) {
    if (i + 3 >= args.size() || args[i + 2] != "-Xclang") return std::nullopt;
    const std::string& option = args[i + 1];
    if (option == "-dependency-file") {
      if (out_.xclang_depfile) return Consumed{i + 3, Passthrough{"multiple-outputs", "-dependency-file given twice"}};
      out_.xclang_depfile = args[i + 3];
      out_.xclang_depfile_index = i + 3;
      return Consumed{i + 3, std::nullopt};
    }
    if (option == "-MT") {
      out_.xclang_targets.push_back(args[i + 3]);
      out_.xclang_target_indexes.push_back(i + 3);
      return Consumed{i + 3, std::nullopt};
    }
    return std::nullopt;
  }

  Driver driver_;
  OffloadPlan& out_;
};

// What the output is, from the mode (measured with hipcc 5.2 / clang 15: device code comes as a clang
// offload bundle even for one target; -S device-only writes one target's assembly, never bundled).
std::string output_kind(const OffloadPlan& p) {
  // clang's CUDA device-only: -S is the target's PTX, -c the cubin ptxas assembles from it.
  if (p.compile.language == kCuda && p.mode == DeviceMode::device_only) return p.assemble ? "ptx" : "cubin";
  if (p.assemble) return "device-assembly";
  if (p.mode == DeviceMode::host_only) return "host-object";
  if (p.genco || p.mode == DeviceMode::device_only) return "offload-bundle";
  return p.rdc ? "object-rdc" : "object";
}

// -S is cached device-only, for one target: clang then writes that target's assembly where -o says
// (with several it refuses -o itself: "cannot specify -o when generating multiple output files").
// -S wins over -c in either order (clang's last phase is the earliest one asked for).
std::optional<Passthrough> assembly_refusal(const OffloadPlan& p) {
  if (!p.assemble) return std::nullopt;
  if (p.genco) return Passthrough{"output-kind", "-S with --genco"};
  if (p.mode != DeviceMode::device_only) return Passthrough{"output-kind", "-S (host assembly)"};
  if (p.targets.size() > 1) return Passthrough{"multiple-outputs", "-S device-only with several targets"};
  return std::nullopt;
}

// clang's CUDA device-only compile writes one file: -c (a cubin: ptxas behind the device compile) or
// -S (PTX), for one target (with several clang refuses -o). Without -c or -S it bundles the device code
// with fatbinary, as a full -c does (cuda_runs_fatbinary).
std::optional<Passthrough> cuda_device_only_refusal(const OffloadPlan& p, bool compile_given) {
  if (p.mode != DeviceMode::device_only) return std::nullopt;
  if (!p.assemble && !compile_given) return Passthrough{"clang-cuda", "device-only without -c or -S runs fatbinary"};
  if (p.targets.size() > 1) return Passthrough{"multiple-outputs", "device-only with several targets"};
  return std::nullopt;
}

}  // namespace

std::optional<Passthrough> cuid_refusal(const OffloadPlan& p, int clang_major) {
  if (p.explicit_cuid) return std::nullopt;
  if (p.use_cuid != "hash" || p.rdc) {
    return Passthrough{"offload-cuid", (p.rdc ? "-fgpu-rdc" : "-fuse-cuid=" + p.use_cuid) + " without -cuid="};
  }
  if (p.compile.language == kHip && (clang_major == 0 || clang_major >= 18)) {
    return Passthrough{"offload-cuid", "clang " + std::to_string(clang_major) + " names the HIP object's cuid"};
  }
  return std::nullopt;
}

int clang_major_version(std::string_view description) {
  const std::size_t at = description.rfind("clang version ");
  if (at == std::string_view::npos) return 0;
  int major = 0;
  for (std::size_t i = at + 14; i < description.size() && std::isdigit(static_cast<unsigned char>(description[i])); ++i) {
    major = major * 10 + (description[i] - '0');
    if (major > 1000) return 0;
  }
  return major;
}

std::optional<Passthrough> cuda_not_cached(const OffloadPlan& p) {
  if (p.compile.language != kCuda) return std::nullopt;
  if (p.mode == DeviceMode::host_only) return Passthrough{"clang-cuda", "--cuda-host-only (not cached yet)"};
  if (p.mode == DeviceMode::both) {
    return Passthrough{"clang-cuda", "a full -c runs fatbinary -image, which CUDA 13's fatbinary does not take"};
  }
  return std::nullopt;
}

bool cuda_target(std::string_view target) {
  if (!target.starts_with("sm_") || target.size() < 5) return false;
  std::string_view digits = target.substr(3);
  if (digits.back() == 'a' || digits.back() == 'f') digits.remove_suffix(1);
  return !digits.empty() &&
         std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::optional<std::string> target_processor(std::string_view target_id) {
  const std::size_t colon = target_id.find(':');
  const std::string_view processor = target_id.substr(0, colon);
  if (processor.size() < 4 || !processor.starts_with("gfx")) return std::nullopt;
  if (!std::all_of(processor.begin() + 3, processor.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); })) {
    return std::nullopt;
  }
  std::set<std::string_view> seen;
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : target_id.substr(colon + 1);
  while (colon != std::string_view::npos) {
    const std::size_t next = rest.find(':');
    const std::string_view feature = rest.substr(0, next);
    if (feature.size() < 2 || (feature.back() != '+' && feature.back() != '-')) return std::nullopt;
    const std::string_view name = feature.substr(0, feature.size() - 1);
    if ((name != "xnack" && name != "sramecc") || !seen.insert(name).second) return std::nullopt;
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  return std::string(processor);
}

// hipcc.pl replaces every argument matching /--genco/ (but -o's value) with --cuda-device-only: `-DX=--genco`
// or a file named a--genco.hip would be a compile the planner never saw.
std::optional<Passthrough> hipcc_rewrite(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o") {
      ++i;
    } else if (args[i] != "--genco" && args[i].find("--genco") != std::string::npos) {
      return Passthrough{"hipcc-rewrite", args[i]};
    }
  }
  return std::nullopt;
}

Plan plan(Driver driver, const std::vector<std::string>& args, const std::vector<std::string>& extra_allowlist) {
  if (driver == Driver::hipcc) {
    if (auto p = hipcc_rewrite(args)) return *p;
  }
  OffloadPlan out;
  OffloadRows rows(driver, out);
  gcc::Plan planned = gcc::plan(args, extra_allowlist, &rows);
  if (auto* p = std::get_if<Passthrough>(&planned)) return *p;
  out.compile = std::get<gcc::CompilePlan>(planned);
  const bool cuda = out.compile.language == kCuda;
  if (out.compile.language != kHip && !cuda) return Passthrough{"language", out.compile.source + " (not HIP)"};
  if (rows.target_refusal) return *rows.target_refusal;
  // Each target of the language's kind: an AMDGPU target ID for HIP, an sm_XX for CUDA.
  for (const auto& t : rows.targets) {
    if (cuda ? !cuda_target(t) : !target_processor(t)) return Passthrough{"offload-target", t};
  }
  // No target: the driver asks the machine's GPU (hipcc: rocm_agent_enumerator; clang: its default).
  // clang's CUDA default is a fixed sm_XX of that clang (keyed with it), not the machine's.
  if (rows.targets.empty() && !cuda) return Passthrough{"offload-target-machine", "no --offload-arch"};
  if (driver == Driver::hipcc && !rows.offload_arch_given) {
    return Passthrough{"offload-target-machine", "hipcc without --offload-arch= adds the machine's GPU"};
  }
  // A processor named twice with different features (gfx90a and gfx90a:xnack+): clang refuses the
  // combination; it says so itself, uncached.
  std::set<std::string> processors;
  for (const auto& t : rows.targets) {
    if (!cuda && !processors.insert(*target_processor(t)).second) return Passthrough{"offload-target", t};
  }
  out.targets.assign(rows.targets.begin(), rows.targets.end());
  // --genco writes the file -o names; without one hipcc's clang would name it after the source.
  if (out.genco && out.compile.output_implied) return Passthrough{"no-output", "--genco without -o"};
  // Device-only: clang names the file after source and target (k.hip-hip-amdgcn-amd-amdhsa.hipfb, or
  // one k-hip-amdgcn-amd-amdhsa-<gfx>.out per target unbundled), not the k.o the gcc plan implies.
  if ((out.mode == DeviceMode::device_only || rows.no_bundle_output) && out.compile.output_implied) {
    return Passthrough{"no-output", "device-only or --no-gpu-bundle-output without -o"};
  }
  if (auto refusal = assembly_refusal(out)) return *refusal;
  if (cuda) {
    if (auto refusal = cuda_device_only_refusal(out, rows.compile_given)) return *refusal;
  }
  if (out.xclang_depfile && (out.xclang_depfile->empty() || *out.xclang_depfile == "-")) {
    return Passthrough{"output-kind", "-dependency-file " + *out.xclang_depfile};
  }
  if (out.xclang_depfile && out.compile.depfile != gcc::Depfile::None) {
    return Passthrough{"multiple-outputs", "-Xclang -dependency-file with -MD/-MMD"};
  }
  if (!out.xclang_targets.empty() && !out.xclang_depfile) {
    return Passthrough{"depfile-modifier", "-Xclang -MT without -Xclang -dependency-file"};
  }
  out.output_kind = output_kind(out);
  return out;
}

}  // namespace kache::compiler::offload
