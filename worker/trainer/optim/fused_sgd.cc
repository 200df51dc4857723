#include "worker/trainer/optim/fused_sgd.h"

#include <ATen/Parallel.h>
#include <c10/util/string_utils.h>

#include <cstdint>
#include <memory>
#include <string>

namespace baton::trainer {
namespace {

// Elements per task of the parallel loop: large enough that a small tensor stays on the
// calling thread.
constexpr int64_t kGrain = 1 << 16;

// One parameter's update over [begin, end): the arithmetic of torch::optim::SGD::step
// (dampening d): g' = g + wd * p; buf = first ? g' : m * buf + (1 - d) * g';
// step = nesterov ? g' + m * buf : buf; p -= lr * step. `kDecay`, `kFirst` and
// `kNesterov` are template parameters so that each variant is a branch-free loop the
// compiler vectorizes.
template <bool kDecay, bool kFirst, bool kNesterov>
void Update(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t begin,
            int64_t end, float lr, float m, float damp, float wd) {
  for (int64_t i = begin; i < end; ++i) {
    float d = g[i];
    if (kDecay) d = d + wd * p[i];
    const float b = kFirst ? d : m * buf[i] + damp * d;
    buf[i] = b;
    const float s = kNesterov ? d + m * b : b;
    p[i] = p[i] + (-lr) * s;
  }
}

using UpdateFn = void (*)(float*, const float*, float*, int64_t, int64_t, float, float, float,
                          float);

UpdateFn Pick(bool decay, bool first, bool nesterov) {
  static constexpr UpdateFn kTable[8] = {
      Update<false, false, false>, Update<false, false, true>, Update<false, true, false>,
      Update<false, true, true>,   Update<true, false, false>, Update<true, false, true>,
      Update<true, true, false>,   Update<true, true, true>,
  };
  return kTable[(decay ? 4 : 0) + (first ? 2 : 0) + (nesterov ? 1 : 0)];
}

bool Fusable(const at::Tensor& p) {
  const at::Tensor& g = p.grad();
  return p.device().is_cpu() && p.scalar_type() == at::kFloat && p.layout() == at::kStrided &&
         p.is_contiguous() && g.defined() && g.device().is_cpu() && g.scalar_type() == at::kFloat &&
         g.layout() == at::kStrided && g.is_contiguous() && g.numel() == p.numel();
}

}  // namespace

at::Tensor FusedSgd::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (torch::optim::OptimizerParamGroup& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    const double momentum = options.momentum();
    for (at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());
      if (momentum == 0 || !Fusable(p)) {
        // LibTorch's update, as SGD::step does it.
        at::Tensor d_p = p.grad();
        if (options.weight_decay() != 0) d_p = d_p.add(p, options.weight_decay());
        if (momentum != 0) {
          at::Tensor buf;
          auto it = state_.find(key);
          if (it == state_.end()) {
            buf = d_p.clone().detach();
            auto state = std::make_unique<torch::optim::SGDParamState>();
            state->momentum_buffer(buf);
            state_[key] = std::move(state);
          } else {
            buf = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
            buf.mul_(momentum).add_(d_p, 1 - options.dampening());
          }
          d_p = options.nesterov() ? d_p.add(buf, momentum) : buf;
        }
        p.add_(d_p, -options.lr());
        continue;
      }
      auto it = state_.find(key);
      const bool first = it == state_.end();
      at::Tensor buf;
      if (first) {
        buf = at::empty_like(p, at::MemoryFormat::Contiguous);
        auto state = std::make_unique<torch::optim::SGDParamState>();
        state->momentum_buffer(buf);
        state_[key] = std::move(state);
      } else {
        buf = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
        if (!buf.is_contiguous() || buf.scalar_type() != at::kFloat || buf.numel() != p.numel()) {
          // A buffer of another kind (loaded from elsewhere): make it one this loop can use.
          buf = buf.to(at::kFloat).contiguous().view_as(p);
          static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer(buf);
        }
      }
      const UpdateFn update = Pick(options.weight_decay() != 0, first, options.nesterov());
      float* pp = p.data_ptr<float>();
      const float* gp = p.grad().data_ptr<float>();
      float* bp = buf.data_ptr<float>();
      const float lr = static_cast<float>(options.lr());
      const float m = static_cast<float>(momentum);
      const float damp = static_cast<float>(1 - options.dampening());
      const float wd = static_cast<float>(options.weight_decay());
      at::parallel_for(0, p.numel(), kGrain, [&](int64_t begin, int64_t end) {
        update(pp, gp, bp, begin, end, lr, m, damp, wd);
      });
    }
  }
  return loss;
}

}  // namespace baton::trainer
