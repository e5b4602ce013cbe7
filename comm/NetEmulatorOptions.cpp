// NetEmulatorOptions (comm/NetEmulator.h) from and to YAML: ranks, subnet, mtu,
// burst_ms, queue_ms and the rate schedule (a list of {at, mbit}).
#include "comm/NetEmulator.h"

namespace gradzip::comm {

NetEmulatorOptions NetEmulatorOptions::fromYaml(YamlReader& r) {
  NetEmulatorOptions o;
  o.ranks = static_cast<int>(r.getInt("ranks", o.ranks, 1, 253));
  o.subnet = r.getString("subnet", o.subnet);
  o.mtu = static_cast<int>(r.getInt("mtu", o.mtu, 576, 65535));
  o.burstMillis = r.getDouble("burst_ms", o.burstMillis, 0.1, 1000.0);
  o.queueMillis = r.getDouble("queue_ms", o.queueMillis, 1.0, 10000.0);
  o.schedule = RateSchedule::fromYaml(r, "schedule");
  if (r.has("mbit")) {  // shorthand for a constant schedule
    if (!o.schedule.empty()) r.fail("mbit", "give either mbit (a constant rate) or schedule, not both");
    const std::string rate = r.getString("mbit", "");
    try {
      o.schedule = RateSchedule::parse(rate);
    } catch (const UserError& e) {
      r.fail("mbit", e.what());
    }
  }
  r.finish();
  return o;
}

void NetEmulatorOptions::toYaml(YAML::Node& n) const {
  n["ranks"] = ranks;
  n["subnet"] = subnet;
  n["mtu"] = mtu;
  n["burst_ms"] = burstMillis;
  n["queue_ms"] = queueMillis;
  YAML::Node s(YAML::NodeType::Sequence);
  schedule.toYaml(s);
  n["schedule"] = s;
}

}  // namespace gradzip::comm
