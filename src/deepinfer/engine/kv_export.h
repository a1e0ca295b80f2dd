// Where a prefill engine's computed prompt blocks go in a disaggregated deployment: the engine
// (through its KV store tier, which names blocks by their store keys) hands each full prompt
// block of a request that carries GenerationRequest::kv_export_tag to this sink, on the engine
// thread, just before the sequence's blocks are released. The decode engine that receives them
// puts them in its own KV store RAM tier (KvStoreTier::import_block), where its admission finds
// them as a prefix hit.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace deepinfer::engine {

class KvExportSink {
 public:
  virtual ~KvExportSink() = default;
  // Block `index` of the prompt (0 = first), its store key and its bytes (KvStoreTier layout).
  // Called in order; the bytes are only valid during the call.
  virtual void export_block(const std::string& tag, int index, const std::array<uint8_t, 32>& key,
                            std::span<const uint8_t> bytes) = 0;
  // Every block of the tag was handed over (`blocks` of them; 0 when the prompt has no full
  // block or the request ended before its prompt was computed).
  virtual void export_done(const std::string& tag, int blocks) = 0;
};

}  // namespace deepinfer::engine
