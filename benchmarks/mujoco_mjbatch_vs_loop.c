// A one-off measurement behind envs/mujoco's choice of thread ranges over
// MuJoCo 4's mjbatch.h (envs/mujoco/README.md, "Threads"); not built by
// CMake. Build and run it against the mujoco wheel of TorchRL's venv:
//   P=build/torchrl-venv/bin/python
//   M=$($P -c 'import mujoco,os;print(os.path.dirname(mujoco.__file__))')
//   G=$($P -c 'import gymnasium,os;print(os.path.dirname(gymnasium.__file__))')
//   gcc -O2 -o /tmp/mjbatch benchmarks/mujoco_mjbatch_vs_loop.c -I$M/include \
//     -L$M -l:libmujoco.so.4.0.0 -Wl,-rpath,$M -lpthread
//   /tmp/mjbatch $G/envs/mujoco/assets/half_cheetah.xml
//
// Times 16 HalfCheetah sims stepped 5 substeps each (one Gymnasium step)
// with per-sim controls: a plain loop of mj_step over 16 mjData, against
// mjbatch (persistent, mjb_apply setting ctrl then stepping, saving the
// state) on 1 and 2 threads. CPU and wall time per step of the 16. The
// "2 threads*" row starts a thread per step and is not a fair pool.
#include <mujoco/mjbatch.h>
#include <mujoco/mujoco.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
enum { N = 16, SKIP = 5, STEPS = 2000 };
static double now(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static mjtNum ctrl[N][6];
static void fill(int step) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < 6; j++)
      ctrl[i][j] = ((i * 7 + j * 3 + step) % 11) / 5.5 - 1.0;
}
static void apply(const mjModel* m, mjData* d, int sim, void* arg) {
  for (int j = 0; j < m->nu; j++) d->ctrl[j] = ctrl[sim][j];
  for (int k = 0; k < SKIP; k++) mj_step(m, d);
}
typedef struct {
  const mjModel* m;
  mjData** d;
  int lo, hi;
} Range;
static void* run_range(void* a) {
  Range* r = a;
  for (int i = r->lo; i < r->hi; i++) apply(r->m, r->d[i], i, 0);
  return 0;
}
int main(int argc, char** argv) {
  char err[1000];
  mjModel* m = mj_loadXML(argv[1], 0, err, sizeof err);
  if (!m) {
    printf("load: %s\n", err);
    return 1;
  }
  mjData* d[N];
  for (int i = 0; i < N; i++) d[i] = mj_makeData(m);
  for (int rep = 0; rep < 3; rep++) {
    double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
    for (int s = 0; s < STEPS; s++) {
      fill(s);
      for (int i = 0; i < N; i++) apply(m, d[i], i, 0);
    }
    double c1 = now(CLOCK_PROCESS_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
    printf(
        "loop       1 thread : %.1f us cpu, %.1f us wall per step of %d\n",
        1e6 * (c1 - c0) / STEPS,
        1e6 * (w1 - w0) / STEPS,
        N);
    c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    w0 = now(CLOCK_MONOTONIC);
    for (int s = 0; s < STEPS; s++) {
      fill(s);
      pthread_t t;
      Range a = {m, d, 0, N / 2}, b = {m, d, N / 2, N};
      pthread_create(&t, 0, run_range, &b);
      run_range(&a);
      pthread_join(t, 0);
    }
    c1 = now(CLOCK_PROCESS_CPUTIME_ID);
    w1 = now(CLOCK_MONOTONIC);
    printf(
        "loop      2 threads*: %.1f us cpu, %.1f us wall (*thread started per "
        "step)\n",
        1e6 * (c1 - c0) / STEPS,
        1e6 * (w1 - w0) / STEPS);
    for (int nt = 1; nt <= 2; nt++) {
      mjBatchConfig cfg;
      mjb_defaultConfig(&cfg);
      cfg.nthread = nt;
      cfg.persistent = 1;
      mjBatch* bt = mjb_makeBatch(m, N, &cfg, err, sizeof err);
      if (!bt) {
        printf("batch: %s\n", err);
        return 1;
      }
      c0 = now(CLOCK_PROCESS_CPUTIME_ID);
      w0 = now(CLOCK_MONOTONIC);
      for (int s = 0; s < STEPS; s++) {
        fill(s);
        mjb_apply(bt, 0, 0, apply, 0, 1);
      }
      c1 = now(CLOCK_PROCESS_CPUTIME_ID);
      w1 = now(CLOCK_MONOTONIC);
      printf(
          "mjb_apply  %d thread : %.1f us cpu, %.1f us wall\n",
          nt,
          1e6 * (c1 - c0) / STEPS,
          1e6 * (w1 - w0) / STEPS);
      mjb_deleteBatch(bt);
    }
  }
  return 0;
}
