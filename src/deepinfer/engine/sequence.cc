// Names for sequence states, for logs and API responses.
#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {

std::string_view to_string(SeqStatus s) {
  switch (s) {
    case SeqStatus::kWaiting: return "waiting";
    case SeqStatus::kRunning: return "running";
    case SeqStatus::kPreempted: return "preempted";
    case SeqStatus::kFinished: return "finished";
  }
  return "unknown";
}

std::string_view to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kGrammarDeadEnd: return "grammar_dead_end";
  }
  return "unknown";
}

}  // namespace deepinfer::engine
