// The decision rule of the MOO controller (flexible-communication paper §3-E):
// candidate plans are points with two objectives to minimise, the step time
// and the statistical cost (ControllerOptions.h statisticalCost), and the
// controller picks a knee of their Pareto front. The paper solves with NSGA-II
// and leaves the knee unspecified; gradzip puts both objectives on one scale
// (KneeScale: by default Relative, each point's excess over the front's best)
// and takes the point nearest the ideal under a user-set weight on time
// (DIGEST.md §5, "our choice").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradzip::trainer {

struct Objectives {
  double time = 0;  // predicted seconds per step, encode/decode included
  double stat = 0;  // statistical cost: 1/gain or vNMSE (lower is better)
};

// How kneePoint puts the two objectives on one scale:
// MinMax:   each min-max normalised over the front (scale-free, but any two
//           points are then (0, 1) and (1, 0): a two-point front is a tie at
//           w = 0.5, however small the time saving);
// Relative: time as the fraction by which a point is slower than the fastest
//           on the front, (t − t_min)/t_min, and the statistical cost as its
//           excess over the best, s − s_min (vNMSE and 1/gain − 1 are already
//           dimensionless fractions of the gradient's energy). A 4% faster
//           step then buys at most a 0.04 vNMSE at w = 0.5.
// Log:      each objective as the log of its ratio to the front's best,
//           t = ln(time/t_min) and s = ln((1 + stat)/(1 + s_min)), and the
//           weighted L1 distance w·t + (1−w)·s instead of the L2 one. Read
//           with the statistical cost as the relative extra steps a plan
//           needs to the target (its steps over fp16's, less 1), e^(2d) at
//           w = 0.5 is the point's predicted time to the target over the
//           ideal's, so the knee is the plan predicted first to the target
//           (time to accuracy, the end-to-end objective of the
//           end-to-end-utility paper, §1-2: step time x steps); other weights
//           tilt it towards speed or accuracy. Statistical costs must be
//           above −1.
enum class KneeScale { MinMax, Relative, Log };

// Indices (ascending) of the points no other point dominates; a point dominates
// another when it is no worse in both objectives and better in one. Equal
// points are all kept. Non-finite objectives are never on the front.
std::vector<size_t> paretoFront(const std::vector<Objectives>& points);

// The knee of `points`' Pareto front: with t and s each normalised over the
// front by `scale` (an objective constant on the front normalises to 0), the point
// minimising sqrt(w·t² + (1−w)·s²) (KneeScale::Log: w·t + (1−w)·s), w =
// timeWeight in [0, 1] (0.5: both count alike; 1: fastest; 0: most
// accurate). Ties go to the lower time, then the lower index. Throws
// UserError when no point has finite objectives. With KneeScale::Relative
// and Log the times must be positive.
//
// timeTolerance ε >= 0 is the cost model's relative error on time: a front
// point is dropped before the knee is taken when another front point has a
// statistical cost lower by more than kFollowGainMargin (1%) of its own and a
// time at most (1 + ε) times its own (ε-dominance,
// Laumanns et al. 2002, "Combining convergence and diversity in evolutionary
// multiobjective optimization", Def. 2, applied to the time objective only).
// A time saving within the model's error then buys no statistical cost. The
// scales (t_min, s_min) stay those of the whole front, so dropping a fast
// point does not make the others look faster. The point with the lowest cost
// is never dropped. 0: the plain front. The margin is followGain's, for the
// same reason: near twins (AR-TopK and TopK at one ratio) must not dominate
// each other, or a faster collective loses to a vNMSE difference that is
// noise (controller_ablation.md, "A time tolerance on the knee").
size_t kneePoint(const std::vector<Objectives>& points, double timeWeight, KneeScale scale,
                 double timeTolerance = 0);

// Whether a candidate predicted at `candidate` could replace the running plan,
// measured at `current`: the knee of the two points is the candidate even
// with its predicted time `margin` slower (the cost model's error, and a
// saving too small to pay for exploring it). Exploration skips candidates that
// cannot: on a link where communication is a few % of the step, nothing can.
bool couldReplace(const Objectives& current, const Objectives& candidate, double margin, double timeWeight,
                  KneeScale scale);

// The rule of a gain-triggered decision: it follows the gain (GraVAC, the
// paper's [2], also sets its compression from the gain). `points` are the screened
// candidates, `own` the running plan's screened statistical cost (on the same
// gradient), `gainChange` the relative change of its smoothed gain that
// triggered. A fall (< 0: the plan now drops more of the gradient than when
// it was chosen) admits only points that compress less (stat below own by
// more than kFollowGainMargin of it); a rise only points that compress more
// (above by as much). The others become infinite, so no front or knee sees
// them. The margin keeps out the running compressor through another
// collective and its near twins (AR-TopK and TopK at one ratio, whose
// screenings differ by noise; controller_ablation.md, "Gain decisions follow
// the gain"): a change of collective is a network decision's business.
// Unchanged when `own` is not finite or the change is 0.
inline constexpr double kFollowGainMargin = 0.01;
std::vector<Objectives> followGain(std::vector<Objectives> points, double own, double gainChange);

}  // namespace gradzip::trainer
