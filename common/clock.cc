#include "common/clock.h"

namespace baton {

Clock* RealClock::Get() {
  static Clock* const clock = new RealClock();
  return clock;
}

}  // namespace baton
