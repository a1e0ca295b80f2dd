// The checks a DeepSeek-V4-family forward (V4, V4.1) makes of a step against its hybrid state
// (deepseek_v4_state.h): the cache matches the spec, the ids are in the vocabulary, each
// sequence's new tokens continue its cache, and the recent rows they read are still there.
#pragma once

#include <cstdint>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/model/forward_batch.h"
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::model {

// Errors name the model (`name`), the sequence and what is wrong.
Status v4_check_hybrid_batch(const KvCacheSpec& want, int64_t vocab_size, std::string_view name,
                             const ForwardBatch& b, const KvCache& cache);

}  // namespace deepinfer::model
