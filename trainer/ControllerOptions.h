// The options of the MOO controller (`compress: auto`): which plans it may
// choose from, how it measures them, when it re-decides and how it trades time
// against statistical cost. Defaults follow the flexible-communication paper
// (§3-E; DIGEST.md §5: the TopK compression ratios [0.1, 0.033, 0.011, 0.004,
// 0.001], re-exploration on a 10% gain drift; exploration is 6 steps per
// candidate rather than the paper's 10, settable) and the end-to-end-utility
// paper's baselines (FP16 first).
//
//   compress: auto                      # all defaults
//   compress:
//     name: auto
//     families: [fp16, topkc, thc]      # compressor families to consider
//     time_weight: 0.85                 # knee preference (1: fastest, 0: most accurate)
//     knee: relative                    # or minmax; or log (at time_weight 0.5: least step x (1 + cost))
//     stat: ef_rate                     # statistical cost (default: ef_rate under SGD, vnmse under AdamW)
//     screen_reps: 8                    # replays of the gradient that screen an error-feedback codec
//     screen_window: 0                  # 8: once there are that many, the last 8 steps' gradients, twice over
//     screen_threads: 2                 # threads rank 0 screens the codecs on (1: its decision thread alone)
//     provisional_step: 2               # leave fp16 for the predicted knee after step 2 (0: off)
//     provisional_rewind: true          # and undo those 2 fp16 steps (they measured)
//     rescreen_first: false             # true: the first decision screens error-feedback codecs afresh
//     sparse_start_above: 0.1           # where fp16 would sync longer a step, the measuring steps run sparse_start_plan
//     geometry: optimizer               # statistical cost of the update (Adam: 1/(√mean v̂+ε) per tensor), or gradient
//     gain_scope: family                # a gain decision keeps the running compressor (or: all)
//     common_base: true                 # measured plans compared on one forward+backward (false: their own steps)
//     recheck_steps: 20                 # once, 20 steps on, re-price the plan's measured cost (default 0: off)
//     explore_min_steps: 2              # a losing candidate stops after 2 timed steps (0: never early)
//     noise_every: 20                   # steps between gradient-noise-scale measurements (0: never)
//     pin: {name: thc, collective: ps}  # pinned mode: measure and log, never switch
#pragma once

#include "comm/NetworkProbe.h"
#include "trainer/Pareto.h"
#include "trainer/Plan.h"
#include "util/Yaml.h"

#include <optional>
#include <string>
#include <vector>

namespace gradzip::trainer {

inline constexpr double kDefaultEfRateScale = 0.03;  // ControllerOptions::efRateScale

// topk{ratio: 0.001}@allgather: ControllerOptions::sparseStartPlan's default.
Plan defaultSparseStartPlan();

struct ControllerOptions {
  // Compressor families; each expands into its parameter grid below, times
  // every collective its capabilities allow (restricted to `collectives` when set).
  // gradiveq may be listed but is not a default: a bucket switching to it
  // starts its schedule (compress/GradiVeQ.h: `warmup` uncompressed steps,
  // then QSGD sampling before the first basis), so its screened cost is its
  // warm-up's, not that of the plan it becomes.
  std::vector<std::string> families = {"fp32", "fp16", "bf16", "topk", "topkc", "artopk", "thc", "cnat", "powersgd"};
  std::vector<std::string> collectives;  // empty: every collective a compressor supports
  std::vector<double> ratios = {0.1, 0.033, 0.011, 0.004, 0.001};  // topk `ratio`, artopk `cr` (paper)
  std::vector<double> topkcBits = {0.5, 2, 8};                     // HotNets Fig. 1 budgets
  std::vector<int64_t> thcBits = {2, 4, 8};  // the parameter-server form (THC paper Alg. 1-3)
  // The all-reduce form with partial rotation (end-to-end-utility paper
  // §3.2.2; b = q, saturating). 4 alone: at b = q = 2 the paper measured
  // BERT's TTA below FP16's (§3.2.3, Figure 2), and here the 2-bit form, whose
  // single-worker screening sees neither the ranks' shared range nor the
  // saturating sum, was explored at 20 Mbit/s in 7 of 12 `schedule_c1` runs
  // (0.41-0.49 s where it was explored alone; it measured a vNMSE of
  // 0.76-0.94 against 0.69-0.75 screened and a step −3% to +17% of the
  // predicted one) and never taken
  // (experiments/results/controller_ablation.md, "THC all-reduce at 4 bits
  // alone"). `thc_allreduce_bits: [2, 4]` brings it back.
  std::vector<int64_t> thcAllReduceBits = {4};
  // PowerSGD ranks. Not 1: on `schedule_c1` (12 seeds, 11-29) the six runs
  // whose knee took rank 1 at 20 or 5 Mbit/s (a predicted step 12-32%
  // shorter than TopKC b=2's) needed 1.14x topk33's steps to 0.83, the six that
  // kept TopKC b=2 1.03x; rerun without rank 1, those six seeds kept
  // TopKC b=2 and needed topk33's steps (286.7 against 286.7 on the mean),
  // 1.04x its time against 1.11x (experiments/results/controller_ablation.md,
  // "`schedule_c1` seeds 7-12" and "Without PowerSGD rank 1"). Its
  // screened vNMSE (0.80-0.88) under ef_rate does not charge what it costs.
  std::vector<int64_t> powersgdRanks = {4, 16};

  // Pareto.h kneePoint weight on time. 0.85, not 0.5: vNMSE overstates what
  // error-feedback compression costs in steps. In fmnist_resnet20_n2_20M
  // (experiments/results) topkc 2-bit (vNMSE 0.53-0.66), THC 4-bit (0.02) and
  // fp16 reached 0.83 at the same evaluation (step 300 or 350 of 468), yet at
  // 0.5 the knee took THC's 35% slower steps for its lower vNMSE.
  double timeWeight = 0.85;
  // Pareto.h KneeScale: relative | minmax | log. log with time_weight 0.5
  // takes the plan of least predicted step x (1 + statistical cost), the
  // time to the target where the cost reads as extra steps. ef_rate at its
  // k (fitted on replays, not on steps) reads about so for TopKC 2-bit and
  // THC 4-bit all-reduce: 0.10-0.20 against the 14% more steps than fp16
  // TopKC 2-bit needed over 20 paired seeds, ~0.001 against THC's 0.97x
  // fp16's steps over 8; it charges TopK 3.3% 0.27-0.54 for steps level
  // with TopKC 2-bit's (controller_ablation.md, "Steps to the target of
  // the static arms"; "A knee on the predicted time to the target").
  std::string knee = "relative";
  // Pareto.h kneePoint timeTolerance ε: a plan whose predicted or measured
  // step is within (1 + ε) of a plan with a clearly lower statistical cost is
  // not taken for that saving, as the provisional step keeps fp16 within
  // explore_margin (5%, the cost model's error). On 11-26 (AVX-512
  // host) it changed two of the suites' step-10 decisions and no other:
  // 20 Mbit/s took TopKC b=2, the best static arm's plan, instead of TopK 3.3%
  // (2.8% faster predicted, the same measured), and VGG-11 PowerSGD r16
  // instead of TopKC b=2, which reached 0.88 in 0.85x fp16's time where the
  // old choice never did (experiments/results/controller_ablation.md, "A time
  // tolerance on the knee"). 0.04 since 11-28: the median error of the
  // model's predicted step against the then-measured one (|measured/predicted
  // − 1| over 83 follow-ups on the AVX-512 host: median 3.9%, p75 7.4%).
  // At 0.05 the 10 Mbit/s provisional knee took TopKC b=2, predicted 4.4-6.4%
  // slower a step than TopK 3.3%, in 4 of 15 runs (seeds 13-16), and TopK
  // 3.3% reached 0.83 in fewer steps on each of those seeds. Replayed over
  // the 106 logged provisional decisions, 0.04 moves 10 of them, all at
  // 10 Mbit/s (8 from TopKC b=2, 2 from TopK 1.1%), to TopK 3.3% and changes
  // no other (controller_ablation.md,
  // "`time_tolerance` 0.04").
  double timeTolerance = 0.04;
  // Statistical cost (statisticalCost below): "ef_rate", error feedback's
  // k·vNMSE/(1 − vNMSE)² (other plans: vNMSE); vnmse; 1/gain as in the paper
  // ("gain"); or "ef", vNMSE/(1 − vNMSE). ef_rate because vNMSE ranks error-
  // feedback plans against the measured steps to the target: on 1-2 seeds
  // TopKC 2-bit (vNMSE 0.72 while it runs), THC 4-bit (0.02) and fp16
  // reached 0.83 at the same step, TopK 0.4% (0.96) 12% later; under vNMSE
  // THC's 20% slower steps won at 20 Mbit/s. On 20 paired seeds (11-28)
  // fp16 needed 12% fewer steps to 0.83 than TopKC 2-bit and 10% fewer than
  // TopK 3.3%, and those two were level (0.98x, 95% interval 0.93-1.03x),
  // which no function of their screened vNMSEs (0.62-0.68, 0.73-0.79)
  // reproduces (controller_ablation.md, "Steps to the target of the static
  // arms, 20 seeds"). It needs the steady-state vNMSE that
  // screen_reps estimates: on the fresh gradient (TopK 0.4%: 0.6) it took the
  // sparsest plans (experiments/results/controller_ablation.md, "A statistical
  // cost from the error-feedback bound" and "Screening the steady state").
  // The YAML default follows the optimizer (defaultStat).
  std::string stat = "ef_rate";
  // Replays of the last gradient that screen an error-feedback codec
  // (Controller::screenCodec): its statistics are the last replay's, whose
  // input carries the residual that has built up. On ResNet-20 gradients
  // (Fashion-MNIST, steps 140-260) 8 replays give TopK 3.3%/1.1%/0.4%/0.1%
  // 0.82/0.90/0.94/0.97 and TopKC 2-bit 0.71-0.72, against 0.73/0.90/0.96/
  // 0.99 and 0.67 in error feedback's steady state along the run; the fresh
  // gradient gives 0.35-0.38/0.47-0.51/0.55-0.60/0.63-0.71 and 0.31-0.34,
  // 2 replays 0.61-0.64/0.73-0.76/0.80-0.82/0.86-0.88 and 0.54-0.58
  // (experiments/python/ef_steady_state.py, rerun 11-28). It costs
  // screen_reps − 2 more encode+decode calls per error-feedback configuration.
  int64_t screenReps = 8;
  // Threads rank 0 screens the codecs on (trainer/WorkAhead.h): each
  // configuration runs whole on one of them, so the statistics are the same
  // bit for bit whatever the count, and its encode/decode seconds are
  // one thread's. The other ranks wait for rank 0's decision, so on a host
  // shared with them the cores they leave idle take the extra threads. At
  // the provisional step one of them starts while β is measured (the sparse
  // start's soundings wait on the link). 1: the decision's thread alone,
  // after β, as before 2026-11-29.
  int64_t screenThreads = 2;
  // Distinct gradients that screen an error-feedback codec once rank 0 holds
  // that many (0: never; the last screen_window steps' local gradients of
  // the buckets screening runs on; fewer where screen_window of them would
  // pass kScreenWindowBytes, 256 MiB, which decision records show as their
  // `screen_gradients`; none from
  // exploration or undone steps): the codec runs over them in order twice,
  // and its statistics are those of the last call, on the newest gradient.
  // Before that (the provisional step, and the first decision that reuses
  // its screenings) it replays the last gradient screen_reps times, as with 0.
  // Replays of one gradient add its dropped coordinates up coherently, which
  // overstates the steady state of the denser sparsifiers: on the ResNet-20
  // gradients of steps 121 and 238, against error feedback along the run
  // (experiments/python/ef_steady_state.py, rerun 11-29), 8 replays read
  // TopK 10%/3.3% 0.63-0.64/0.82-0.83 and TopKC 2-bit 0.71-0.72 (run 0.42/
  // 0.73, 0.67); the last 8 gradients twice 0.47-0.49/0.77 and 0.68-0.70,
  // and TopK 1.1%/0.4%/0.1% and TopKC 0.5-bit within 0.03 of the run as
  // replays are. Once (W8) it reads those 0.06-0.10 low (TopK 1.1%: 0.80).
  // Off by default: no gain. On schedule_c1 (seeds 1-12, 11-29, interleaved
  // with the same binary at 0) it made TopK 3.3% the predicted knee of all
  // twelve step-121 decisions at 20 Mbit/s (at 0: TopKC b=2 in all), but in
  // nine TopKC b=2, explored against that prediction, measured −2% to +5%
  // of its time and won on ef_rate (0.11-0.26 against 0.25-0.55); the three
  // runs on TopK 3.3% needed 310-330 steps to 0.83 against topk33's
  // 270-310. At 5 Mbit/s three runs went to TopK 1.1%. 1.034x the time at
  // 0 on the means (0.98-1.09x), 1.03x the steps, 2.05 s charged against
  // 0.99 s: a fresh screening took 0.24-0.27 s instead of 0.12-0.16, and
  // the step-121 decision explored more (experiments/results/
  // controller_ablation.md, "Screening over the last 8 gradients"). The
  // estimate is the closer one, but ef_rate's k was fitted on replays. It
  // costs 2·screen_window − screen_reps more codec calls per error-feedback
  // configuration at those screenings, and rank 0 copies those buckets'
  // gradients each step. The window is not checkpointed: a resumed run
  // replays until it holds screen_window gradients again, so its decisions
  // in those steps may differ from the uninterrupted run's.
  int64_t screenWindow = 0;
  // ef_rate's k, the bound's 8γL (statisticalCost). 0.03: the middle, in
  // log terms, of the window [0.025, 0.04) in which each of the 62 step-2 and
  // step-10 decisions (but one step-10 predicted knee, TopK 3.3% at 10
  // Mbit/s, whose run kept TopKC b=2 within explore_margin) of the 32
  // `auto` runs logged on the AVX-512 host
  // (11-26/27: 10, 20, 50 and 200 Mbit/s, two epochs, VGG-11, schedule_c1),
  // replayed by experiments/python/replay_knee.py with time_tolerance 0.05,
  // takes the plan its row's runs favour. 10 Mbit/s leaves TopK 1.1%
  // (screened vNMSE 0.84-0.86; 310-410 steps to 0.83 against TopKC b=2's
  // 270-320, level or behind on 4 seeds at k = 0.015) for TopKC b=2 from
  // 0.025; 20 Mbit/s keeps TopKC b=2 from 0.0125; THC 4-bit takes 50
  // Mbit/s from 0.04 and VGG-11 from 0.045 (PowerSGD r16 met its goal);
  // 200 Mbit/s is THC's at every k. Measured at 0.03 (6 seeds): 10 Mbit/s
  // ran TopKC b=2 in 5, 1.06x (TopK 3.3%, predicted 5.1% faster, in the
  // sixth; k cannot remove it below 0.04). At time_weight 0.85 a plan
  // under error feedback with steady-state vNMSE 0.6 then beats a lossless
  // one only if the lossless step is over 4.7% longer; at 0.7, 9.8%; at
  // 0.8, 25%; at 0.9, 113% (experiments/results/controller_ablation.md,
  // "ef_rate_scale 0.03"). The earlier 0.015 was fitted on fresh-gradient
  // vNMSEs, before screening reached the steady state. 0.06, which the
  // replay of 99 logged decisions favoured at 50 Mbit/s, ran interleaved
  // against 0.03 (11-27, d45b438): 1.06x against 0.97x the best static arm
  // at 50 Mbit/s (seeds 5-8), 1.12x against 1.04x at 10 Mbit/s (seeds
  // 13-16); it took THC in seeds where THC was the slower arm, and its gain
  // decisions moved to less compressed, slower plans (controller_ablation.md,
  // "ef_rate_scale 0.06 interleaved").
  double efRateScale = kDefaultEfRateScale;
  // Where the statistical cost is measured (trainer/OptimizerGeometry.h):
  // "optimizer", the update's geometry (Adam/AdamW: each tensor weighted by
  // 1/(√mean(v̂) + ε); SGD: the gradient's, unchanged), or "gradient" (unweighted).
  std::string geometry = "optimizer";
  // Steps on `initial` before the first decision: enough for the base step
  // time and a gradient to screen. 10, not 20: on a slow link every step
  // before the decision runs at fp16's cost (0.9 s at 10 Mbit/s against
  // 0.1 s for TopK), and the decisions at step 10 were of the kind taken at
  // step 20 on every suite measured: sparsifiers at 10-50 Mbit/s, THC
  // all-reduce at 200 Mbit/s and on BERT-mini, fp16 unshaped
  // (experiments/results/controller_ablation.md, "the first decision at
  // step 10").
  int64_t warmupSteps = 10;
  // The step after which the warm-up leaves `initial` for the knee of the
  // predicted front (screened on that step's gradient, not explored; 0 or
  // >= warmup_steps: off; never in pinned mode), unless `initial` is
  // predicted within explore_margin of the knee.
  // At 10 Mbit/s an fp16 step takes 0.9 s against 0.1 s for TopK; with it
  // the step-50 evaluation came up to 8 s sooner there
  // (experiments/results/controller_ablation.md, "A provisional plan"). 2, not 1:
  // the first step's compute carries the start-up costs.
  int64_t provisionalStep = 2;
  // When the provisional step leaves `initial`, the steps before it are
  // undone: training restarts from the state before the first step, on the
  // knee, and only their wall time is charged (as for exploration). Those
  // steps measured the compute time, β and a gradient to screen; trained,
  // two dense fp16 steps at the start cost TopKC b=2 under error feedback
  // 30-110 steps to 0.88 in 8 of 8 paired seeds of two epochs at 20 Mbit/s
  // (experiments/results/controller_ablation.md, "Two epochs at 20 Mbit/s: 6
  // seeds, and where auto's steps go"); undone, they cost their time, ~0.9 s
  // there, and auto with the static arm's plan follows that arm's path bit
  // for bit (same file, "Undoing the warm-up's fp16 steps").
  bool provisionalRewind = true;
  // true: the first decision (warmup_steps) screens the error-feedback
  // codecs afresh, on its own step's gradient, and reuses the provisional
  // step's screenings of the others (their statistics are of one gradient
  // either way; encode/decode times and wire bits do not change in 8 steps).
  // Why: the step-2 gradient, at the start of the learning-rate warm-up, is
  // one a sparse residual holds well. Offline (ResNet-20, batches of 64, two
  // seeds; experiments/python/ef_early_screening.py) replays of it read TopK
  // 1.1% at an ef_rate of 1.24-1.43 where error feedback along steps 21-30
  // ran at 3.17-3.37, and replays of the step-10 gradient at 2.10-2.26; TopK
  // 3.3% 0.43-0.46 and 0.62-0.67 against 0.44-0.46. Reusing them, the first
  // decision keeps a provisional TopK 1.1% until the first gain decision at
  // step ~210. Measured at 10 Mbit/s (seeds 29, 31, 35, 37, 40 and 42,
  // 12-03, AMD host; controller_ablation.md, "The first decision screens
  // error feedback afresh"): the re-screening took 0.09-0.14 s, and moved 4
  // of the 5 provisional TopK 1.1% plans at step 10, to TopKC b=2 (3) or
  // AR-TopK 3.3% (1). Those needed fewer steps (313 against 325 to 0.83 on
  // the means, 1.09x topk33's against 1.13x) but ran 155-190 ms a step
  // against TopK 1.1%'s 119-151, so 1.106x topk33's time against 1.041x
  // with the reuse. Not the default.
  bool rescreenFirst = false;
  // A slow link at the start. The steps before the provisional step measure
  // (compute time, a gradient to screen, β) and are undone when the knee is
  // not `initial`; on a slow link their fp16 sync is most of their time and
  // thrown away: the two took 1.65 s on ResNet-20 at 10 Mbit/s and 18 s on
  // VGG-11 at 20 Mbit/s, start-up included. So when the start-up probe (its burst-optimistic β: a
  // lower bound on the sync) predicts `initial`'s sync above
  // sparse_start_above seconds a step, those steps run sparse_start_plan
  // instead (TopK 0.1%: 272 coordinates x 6 bytes a step on ResNet-20), β comes from two timed
  // all-reduces sized to take ~kSparseSoundSeconds at the probe's rate, and
  // the provisional step rewinds unless its choice is that plan itself (even
  // for `initial`). On a fast link the provisional step usually keeps fp16
  // and its steps with it, which undoing them would throw away: hence a
  // threshold. 0.1 s since 11-28 (1 s before, when the sparse start's β
  // tipped the 10 Mbit/s knee towards TopKC b=2 within the then 5%
  // time_tolerance). With time_tolerance 0.04, ResNet-20 at 10 Mbit/s (0.23 s
  // predicted, seeds 13-16) was charged 0.90-1.04 s for the provisional step
  // against 1.88-2.38 s with the fp16 steps (one run 3.5 s: a slow first
  // step), took TopK 3.3% in 3 of 4 seeds against 2 of 4, and reached 0.83
  // in 1.06x topk33's time against 1.13x; at 20 Mbit/s it was charged
  // 0.84-0.98 s against 1.28-1.52 s with the same plans and steps. VGG-11 and
  // BERT-mini at 200 Mbit/s (12 steps each) were predicted below 0.1 s (the
  // probe's β is burst-optimistic there) and took no sparse start. Where a
  // run predicted just above it keeps `initial` (compute ~20x the sync or
  // more), the two undone steps are the cost (experiments/results/
  // controller_ablation.md, "A sparse start and a pipelined trigger check",
  // "`time_tolerance` 0.04"). Needs provisional_rewind; a large value
  // (1e9): never.
  double sparseStartAbove = 0.1;
  Plan sparseStartPlan = defaultSparseStartPlan();
  // Steps per explored candidate, the first untimed. The paper uses 10; 6
  // keeps a decision (explore x explore_steps steps) near 10% of min_interval.
  int64_t exploreSteps = 6;
  // Timed steps every explored candidate gets; after them it stops as soon
  // as even its fastest step, with its statistics so far, could not replace
  // the knee of what the decision measured before it: the running plan as
  // measured (unless a network decision re-measures it) and the candidates
  // explored earlier (Pareto.h couldReplace at margin 0; a loaded host only
  // slows steps down, so the fastest is an optimistic estimate).
  // 0: every candidate runs explore_steps.
  int64_t exploreMinSteps = 2;
  int64_t explore = 3;            // candidates from the predicted front explored per decision
  // A candidate is explored only if it would replace the running plan (its
  // measured step and statistics) with its predicted step this much slower
  // (Pareto.h couldReplace; the cost model is within ~5% on measured runs).
  // Not applied when the running plan must be re-measured (network decisions).
  // The provisional step leaves `initial` only for a knee that, predicted
  // this much slower, would still replace it as predicted.
  double exploreMargin = 0.05;
  // Steps between trigger checks (one 24-byte broadcast each, of rank 0's
  // verdict, which the next check acts on: Controller::afterStep). 1, not 5:
  // a network change waits for the next check after it has persisted, and on
  // schedule_c1 every fp16 step at 20 Mbit/s costs ~0.23 s more than the
  // plan the decision moves to. Pipelined, a check costs ~0.1 ms; waited for
  // at once it cost 1.2 ms a step unshaped and 6.5 ms at 10 Mbit/s.
  int64_t checkEvery = 1;
  int64_t minInterval = 200;      // steps between a decision and the next gain-triggered one
  // Steps after a decision at which it is checked once against the running
  // plan's statistical cost as measured over the last half of them (its
  // error-feedback residual built up by then): when the decision's own
  // screened front, re-priced with that cost, has its knee at a plan that
  // compresses less (Pareto.h recheckKnee), a decision with the "cost"
  // trigger follows, as a gain decision towards less compression does, before
  // min_interval. 0 (the default): never; 20 is the setting measured. Not
  // after a "cost" decision itself, nor when pinned. Why: the provisional
  // step screens on replays of the step-2 gradient, which read TopK 1.1% on
  // ResNet-20 at an ef_rate of 0.56-0.83 where it ran at 2.1-3.9 over steps
  // 21-30, while TopK 3.3% screens at 0.27-0.43 and ran at 0.41-0.56; at 10
  // Mbit/s the knee between the two is within 1% (seeds 31 and 33 of the
  // 12-02 evening: 0.099 against 0.108, 0.112 against 0.111). On 10
  // Mbit/s, seeds 29, 31 and 34-37 (12-02 22:41-23:17, AMD host), at 20 it
  // fired in the three runs whose provisional step took TopK 1.1% and in no
  // other; the decision at step 31 took TopKC b=2 twice and TopK 3.3% once,
  // and the three still needed 1.21x, 1.07x and 1.10x topk33's steps to 0.83
  // (seed 29 with no recheck fired, under a first build: 1.21x too). At 20
  // Mbit/s (seeds 39, 40, 44) it fired once, on TopK 3.3% (0.51 against
  // 0.27 screened), and that decision kept it. No gain shown, so off
  // (controller_ablation.md, "A recheck of the decision's cost").
  int64_t recheckSteps = 0;
  // Steps between a decision and the next network- or step-time-triggered
  // one: a link that changed is acted on soon (the change must still persist
  // 5 steps), while gain drift, which moves slowly, waits min_interval. A
  // severe or sharp slowdown after a decision that measured its references
  // does not wait (Controller::sendVerdict).
  int64_t networkInterval = 30;
  double gainDrift = 0.10;        // relative change of the smoothed gain that re-decides (paper: 10%)
  // Which plans a gain-triggered decision may move to: "family", the running
  // compressor's own parameters and collectives (GraVAC, the flexible-
  // communication paper's [2], adapts one compressor's compression factor
  // to the gain), or "all" families. "family", not "all": every gain
  // decision that moved under "all" in the provisional-plan runs
  // (experiments/results/controller_ablation.md) went from a sparsifier to
  // THC 4-bit all-reduce, whose steps were 17-31% slower without reaching the
  // target in fewer steps. Changing family is the business of the first
  // decision and of network decisions, which see a different link. Under
  // "family" a gain decision screens that grid alone (0.6 s of each such
  // decision went to screening all 97 candidates of the default grid then,
  // on ResNet-20; 90 since PowerSGD rank 1 and the 2-bit THC all-reduce left
  // it on 11-29).
  std::string gainScope = "family";
  // How a decision compares the plans it measured (the running plan's last
  // steps, each explored candidate's few). false: each by its steps as
  // measured. true: where no sync overlaps backward (one bucket, or
  // overlap off: GradSync::overlapsBackward), each by one base, the mean
  // forward+backward of the running plan's steps since the last decision
  // (the predictions' base, baseStep), plus its own step − compute. There
  // forward+backward does not depend on the plan, while the host's load
  // moves it from one run of steps to the next: on an AVX2 host whose
  // forward+backward moved between 0.46 and 0.63 s a step (10-step means)
  // within one ResNet-20 run (20 Mbit/s, 12-03), the step-211 gain decision of seed 51 explored TopKC
  // 8 bits at 0.681 s (5 steps) against TopKC b=2's 0.670 (its last 9) and
  // took it for its lower cost; its follow-up measured 0.743 s a step, and
  // its exposed sync ran 0.145-0.203 s a step (10-step means) against
  // TopKC b=2's 0.036-0.073 before it (experiments/results/
  // controller_ablation.md, "Plans measured on one base"). With overlap
  // each plan keeps its own: a sync that overlaps backward slows it (THC
  // 4-bit PS with 0.25 MB buckets: 0.178 s against 0.153; OverlapModel.h).
  // Not yet measured on time to accuracy against false, the rule before
  // 12-03.
  bool commonBase = true;
  double networkDrift = 0.30;     // relative change of observed/predicted communication time that re-decides
  // Bandwidth soundings (trainer/BandwidthSounding.h) while the running plan
  // is latency-bound (its collectives move less than 32 KB a step, within a
  // token bucket's burst): one timed 64 KB all-reduce every sound_every steps
  // (0: never), less often where it would take more than sound_share of the
  // steps in between. Two soundings in a row whose time moved by more than
  // 2·network_drift (and 1 ms) call a decision, which measures β with
  // all-reduces sized to take sound_share of sound_every steps (up to 4 MB).
  // Off in pinned mode, which must train like the static plan.
  int64_t soundEvery = 50;
  double soundShare = 0.02;
  // Steps between measurements of the gradient noise scale
  // (trainer/GradientNoise.h; logged as `noise` records for `gradzip
  // simulate`, which carries the steps to a target to other batch sizes
  // with it): one all-reduce of kNoiseSample = 2048 coordinates (8 KB) of
  // the ranks' gradients, median 2.4 ms (p90 5.1 ms) over 69 measurements at
  // 20 Mbit/s with 2 ranks, 0.12 ms a step at every 20 steps
  // (experiments/results/controller_ablation.md, "20 Mbit/s, seeds 4-6";
  // 0: never). Frequent and small rather than rare and large: with 2 ranks
  // each measurement is one draw of the batches' noise, so the estimate
  // needs many. From the warm-up's end on; off in pinned mode, as soundings.
  int64_t noiseEvery = 20;
  // Steps after a decision (after the 10 the drift detectors calibrate on)
  // whose mean step time is logged against the decision's prediction.
  int64_t followupSteps = 20;
  int64_t smallBucketKb = 64;     // buckets below this stay on small_plan
  Plan smallPlan;                 // fp16@engine
  Plan initial;                   // fp16@engine: the baseline until the first decision
  std::optional<Plan> pin;        // pinned mode: run this plan, measure and log what auto would pick
  // The full α-β probe, where the collectives give no β (start-up, network
  // decisions); its budget also bounds the short probes (start: 1 and 4 KB;
  // a network decision's α: 8-byte round trips; 0.5 s).
  comm::ProbeOptions probe;

  KneeScale kneeScale() const {
    return knee == "minmax" ? KneeScale::MinMax : knee == "log" ? KneeScale::Log : KneeScale::Relative;
  }
  // Pareto.h kneePoint of `points` under these options (time_weight, knee, time_tolerance).
  size_t kneeOf(const std::vector<Objectives>& points) const {
    return kneePoint(points, timeWeight, kneeScale(), timeTolerance);
  }

  // `optimizer` (OptimOptions::name) picks the default `stat` (defaultStat).
  static ControllerOptions fromYaml(YamlReader& r, const std::string& optimizer = "sgd");
  // "ef_rate" under SGD; "vnmse" under AdamW: the error-feedback bound behind
  // ef_rate is SGD's, and under Adam's per-coordinate scaling error feedback
  // on the gradient loses that guarantee (Tang et al. 2021, "1-bit Adam", §3).
  static std::string defaultStat(const std::string& optimizer);
  YAML::Node toYaml() const;
};

// The statistical cost the knee trades against time, from a plan's measured
// vNMSE = ||x − C(x)||²/||x||² and gain = ||C(x)||²/||x||² (x: the compressor's
// input, the residual included under error feedback):
//   "ef_rate": for a plan under error feedback, k·(1 − δ)/δ² with the
//            contraction δ = 1 − vNMSE and k = ef_rate_scale: the
//            compression term of EF-SGD's non-convex bound, 4γ²L²σ²(1 − δ)/δ²,
//            relative to its SGD noise term γLσ²/2, is 8γL·(1 − δ)/δ²
//            (Karimireddy et al. 2019, "Error feedback fixes SignSGD",
//            Thm II): ~0 up to vNMSE 0.6 and steep beyond 0.85, as the
//            measured steps to the target are, if vNMSE is the steady
//            state's. Other plans (unbiased, or lossy without error
//            feedback): vNMSE, the variance that enters the leading term
//            (QSGD, Alistarh et al. 2017, Thm 3.2). The bound is SGD's; under
//            Adam error feedback on the gradient loses it (Tang et al. 2021,
//            "1-bit Adam", §3).
//   "vnmse": vNMSE;
//   "gain":  1/gain (flexible-communication paper §3-E, from GraVAC);
//   "ef":    vNMSE/(1 − vNMSE) = 1/δ − 1 for the contraction δ = 1 − vNMSE,
//            the factor by which error feedback's memory term grows
//            (Stich et al. 2018, "Sparsified SGD with memory", Thm 2.4: the
//            k/d of top-k there is δ); ≈ vNMSE when small, unbounded as
//            compression discards everything (vNMSE >= 1: infinite).
// Non-finite inputs give +infinity.
double statisticalCost(const std::string& stat, double vnmse, double gain, bool errorFeedback = false,
                       double efRateScale = kDefaultEfRateScale);
// The same under `o` (its stat and ef_rate_scale) for `plan`, whose
// error-feedback flag is read only under ef_rate: the controller's and
// `gradzip simulate`'s one way to cost a plan.
double statisticalCost(const ControllerOptions& o, const Plan& plan, double vnmse, double gain);

}  // namespace gradzip::trainer
