// `gradzip train CONFIG`: loads the config, joins the ranks and runs the Trainer.
#include "trainer/Commands.h"

#include "util/Error.h"

namespace gradzip::trainer {

int trainCommand(const TrainArgs& args) {
  throw UserError(fmt::format("{}: the trainer is not built yet", args.config));
}

}  // namespace gradzip::trainer
