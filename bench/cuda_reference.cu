// The vendor stack's figures for the same work as hcq's device benchmarks, measured in the same
// run on the same GPU: CUDA runtime launches, CUDA graph relaunch with 8 changed kernel
// parameters (hcq's BM_BatchReplay8Changed), and pageable host-to-device copies
// (BM_StagedCopyIn). Built only where nvcc and the CUDA runtime are installed; run only where
// an NVIDIA GPU is (it reports an error and skips everything otherwise).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

__global__ void empty() {}

// fill_u32 as kernels.cu has it: dst[i] = value for i < n.
__global__ void fill_u32(unsigned* dst, unsigned value, unsigned n, unsigned block) {
  unsigned i = blockIdx.x * block + threadIdx.x;
  if (i < n) dst[i] = value;
}

bool check(cudaError_t e, benchmark::State& state, const char* what) {
  if (e == cudaSuccess) return true;
  state.SkipWithError((std::string(what) + ": " + cudaGetErrorString(e)).c_str());
  return false;
}
#define CHECK(call) \
  if (!check((call), state, #call)) return

// One empty kernel launched and waited for (hcq: BM_EmptyLaunchRoundTrip/nv:0).
void BM_CudaEmptyLaunchRoundTrip(benchmark::State& state) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (auto _ : state) {
    empty<<<1, 1, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
  }
  cudaStreamDestroy(s);
}
BENCHMARK(BM_CudaEmptyLaunchRoundTrip)->UseRealTime();

// 1000 empty launches back to back, then one wait (hcq: BM_EmptyLaunchThroughput/nv:0).
void BM_CudaEmptyLaunchThroughput(benchmark::State& state) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (auto _ : state) {
    for (int i = 0; i < 1000; i++) empty<<<1, 1, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * 1000);
  cudaStreamDestroy(s);
}
BENCHMARK(BM_CudaEmptyLaunchThroughput)->UseRealTime()->Unit(benchmark::kMillisecond);

// A graph of `calls` fill kernels in a chain, 8 of which get a new destination at each
// relaunch: the CPU time of the 8 parameter updates plus cudaGraphLaunch, the previous launch
// waited for outside the timed region, as BM_BatchReplay8Changed times hcq's run().
void BM_CudaGraphRelaunch8Changed(benchmark::State& state) {
  const int calls = int(state.range(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* bufs[2][8];
  for (auto& set : bufs)
    for (auto& b : set) CHECK(cudaMalloc(&b, 4096));
  unsigned* work;
  CHECK(cudaMalloc(&work, 8 * 4096));
  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  std::vector<cudaGraphNode_t> node_list(static_cast<size_t>(calls));
  cudaGraphNode_t* nodes = node_list.data();
  std::vector<cudaKernelNodeParams> params(8);
  unsigned value = 0, n = 64, block = 64;
  unsigned* dst = nullptr;
  void* args[4] = {&dst, &value, &n, &block};
  for (int i = 0; i < calls; i++) {
    dst = i < 8 ? bufs[1][i] : work + (i % 8) * 1024 + (i * 64 % 2048) / 4;
    value = unsigned(i);
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(fill_u32);
    p.gridDim = dim3(1);
    p.blockDim = dim3(64);
    p.kernelParams = args;
    CHECK(cudaGraphAddKernelNode(nodes + i, g, i ? nodes + i - 1 : nullptr, i ? 1 : 0, &p));
    if (i < 8) params[size_t(i)] = p;
  }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(cudaGraphLaunch(exec, s));
  int k = 0;
  for (auto _ : state) {
    CHECK(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 8 && i < calls; i++) {
      dst = bufs[k][i];
      value = unsigned(i);
      params[size_t(i)].kernelParams = args;  // the values are copied at the call
      cudaGraphExecKernelNodeSetParams(exec, *(nodes + i), &params[size_t(i)]);
    }
    cudaGraphLaunch(exec, s);
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    k ^= 1;
  }
  CHECK(cudaStreamSynchronize(s));
  state.counters["calls"] = double(calls);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  for (auto& set : bufs)
    for (auto& b : set) cudaFree(b);
  cudaFree(work);
  cudaStreamDestroy(s);
}
BENCHMARK(BM_CudaGraphRelaunch8Changed)
    ->Arg(10)->Arg(100)->Arg(1000)->Arg(10000)
    ->UseManualTime()->Iterations(300)->Unit(benchmark::kNanosecond);

// 256 MiB from pageable host memory into device memory (hcq: BM_StagedCopyIn/nv:0).
void BM_CudaPageableCopyIn(benchmark::State& state) {
  const size_t bytes = 256u << 20;
  std::vector<char> src(bytes, 1);
  void* dst;
  CHECK(cudaMalloc(&dst, bytes));
  CHECK(cudaMemcpy(dst, src.data(), bytes, cudaMemcpyHostToDevice));
  for (auto _ : state) CHECK(cudaMemcpy(dst, src.data(), bytes, cudaMemcpyHostToDevice));
  state.SetBytesProcessed(int64_t(state.iterations() * bytes));
  cudaFree(dst);
}
BENCHMARK(BM_CudaPageableCopyIn)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
