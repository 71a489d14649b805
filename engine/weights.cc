// Where weights live: file mappings, model-owned buffers, and the placing of
// stored tensors into a Model's dtype. Also the model's memory footprint.
#include "engine/weights.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/host_parallel.h"
#include "engine/page_release.h"
#include "engine/zeroed_buffer.h"
#include "formats/quants.h"

namespace verity {
namespace {

constexpr int kNamedCopies = 1;  // unaligned copies: the first named, the rest counted (one line each)

// Maps the pages of [begin, end) (page-aligned begin).
void PrefaultPages(uintptr_t begin, uintptr_t end, uintptr_t page) {
#ifdef MADV_POPULATE_READ
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) == 0) return;
#endif
  unsigned char sink = 0;  // older kernels: touch one byte per page
  for (uintptr_t a = begin; a < end; a += page) sink ^= *reinterpret_cast<const volatile unsigned char*>(a);
  (void)sink;
}

// Maps the pages of [p, p + n) now, at load, rather than one fault at a time
// during the first forward passes (the bytes are read for every token). A
// large matrix's pages are mapped on the load's threads, in 2 MB ranges: the
// kernel maps a range's pages one after another, ~13.5 GB of them for a 7B.
void Prefault(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  ParallelBytes(static_cast<int64_t>(end - begin), [&](int64_t a, int64_t b) {
    PrefaultPages(begin + static_cast<uintptr_t>(a), begin + static_cast<uintptr_t>(b), page);
  });
}

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// Where a weight matrix must start to be used in place (see Matrix).
constexpr size_t kInPlaceAlignment = 32;

// The kernels' dtype that a stored element type already is, if any.
bool SameAs(TensorDType stored, kernels::DType dtype) {
  return (stored == TensorDType::kF32 && dtype == kernels::DType::kF32) ||
         (stored == TensorDType::kBF16 && dtype == kernels::DType::kBF16);
}

// One row of GGUF Q8_0 blocks (f16 scale, 32 int8: 34 bytes) as the kernels'
// q8_0 blocks (f32 scale, 32 int8: 36 bytes), written in their row layout
// (kernels.h).
void RepackGgufQ8_0(const unsigned char* src, int cols, unsigned char* dst) {
  std::vector<unsigned char> blocks(kernels::RowBytes(kernels::DType::kQ8_0, cols));
  for (int b = 0; b < cols / kernels::kQ8_0BlockSize; b++) {
    const unsigned char* in = src + b * kGgufQ8_0BlockBytes;
    unsigned char* out = blocks.data() + b * kernels::kQ8_0BlockBytes;
    const float scale = F16ToF32(static_cast<uint16_t>(in[0] | (in[1] << 8)));
    std::memcpy(out, &scale, 4);
    std::memcpy(out + 4, in + 2, kernels::kQ8_0BlockSize);
  }
  kernels::EncodeQ8_0Blocks(blocks.data(), cols, dst);
}

// One row of block type T (whole blocks; the type and the row length were
// checked at load, so Dequantize cannot fail here).
template <uint32_t T>
void DequantizeRow(const unsigned char* row, int cols, float* out) {
  static const std::string where = "row";
  (void)quants::Dequantize(T, row, cols / quants::FindLayout(T)->block_elems, out, where);
}

template <uint32_t T>
kernels::BlockFormat FormatOf() {
  const quants::Layout* l = quants::FindLayout(T);
  return {l->name, l->type, static_cast<int>(l->block_elems), static_cast<int>(l->block_bytes), &DequantizeRow<T>};
}

}  // namespace

const kernels::BlockFormat* BlockFormatOf(uint32_t type) {
  using namespace quants;
  static const kernels::BlockFormat formats[] = {
      FormatOf<kQ4_0>(), FormatOf<kQ4_1>(), FormatOf<kQ5_0>(), FormatOf<kQ5_1>(), FormatOf<kQ8_0>(),
      FormatOf<kQ2_K>(), FormatOf<kQ3_K>(), FormatOf<kQ4_K>(), FormatOf<kQ5_K>(), FormatOf<kQ6_K>()};
  const quants::Layout* l = FindLayout(type);
  if (!l) return nullptr;
  for (const kernels::BlockFormat& f : formats)
    if (std::string(f.name) == l->name) return &f;
  return nullptr;
}

void ReadVector(const Model& m, const float* const* vec, int64_t count, float* out) {
  if (*vec) {
    std::memcpy(out, *vec, static_cast<size_t>(count) * 4);
    return;
  }
  const kernels::Weights& w = m.embedding_blocks;
  for (int r = 0; r < w.rows; r++) kernels::DecodeRow(w, r, out + static_cast<size_t>(r) * w.cols);
}

std::string WeightsDTypeName(const Model& model) {
  if (model.block_types.empty()) return kernels::DTypeName(model.dtype);
  std::string name = "block";
  for (const std::string& t : model.block_types) {
    name += "_";
    for (char c : t) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return name;
}

Status CheckBackendRunsModel(const Model& model, const kernels::Backend& backend) {
  const ModelConfig& c = model.config;
  if (c.sliding_window > 0 && c.seq_len > c.sliding_window && !backend.attends_windows())
    return Status::Error(model.source + ": a context of " + std::to_string(c.seq_len) + " passes the model's sliding " +
                         "window of " + std::to_string(c.sliding_window) + ", and the " + backend.name() +
                         " backend does not attend within a window (use --ctx " + std::to_string(c.sliding_window) +
                         " or less, or --backend fast or reference)");
  if (c.gemma && !backend.runs_gemma())
    return Status::Error(model.source + ": a Gemma model needs its attention's scale and soft-cap, the GeGLU gate " +
                         "and the scaled embedding, and the " + backend.name() +
                         " backend does not compute them (use --backend fast or reference)");
  for (const Model::BlockTensor& b : model.first_of_each_block_type)
    if (!backend.runs_block_type(b.ggml_type))
      return Status::Error(model.source + ": tensor " + b.tensor + " (" + b.type +
                           ") is a llama.cpp block quantization, and the " + backend.name() +
                           " backend has no kernel for " + b.type + " (use --backend fast or reference)");
  return OkStatus();
}

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::Error(path + ": cannot stat (" + std::strerror(e) + ")");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return Status::Error(path + ": cannot map (" + std::strerror(e) + ")");
    }
    f->data_ = static_cast<const unsigned char*>(p);
    madvise(p, f->size_, MADV_WILLNEED);  // start reading ahead now
  }
  ::close(fd);  // the mapping keeps the file
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<unsigned char*>(data_), size_);
}

void Model::Free::operator()(void* p) const { std::free(p); }

void Model::UseWeightArena() { arena_on_ = true; }

void* Model::Allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  // The kernels stream every matrix once per token, and 4 KB pages cost a
  // page walk (and a prefetcher restart) every 4 KB. A matrix under 2 MB
  // cannot have a huge page of its own, so on a large model they are packed
  // into 64 MB huge-page slabs: measured on the ~110M synth, only 27 of
  // q8_0's ~115 MB of matrices (all under 2 MB but the classifier) and 121 of
  // bf16's ~200 MB had huge pages, against 364 of f32's ~400 MB.
  constexpr size_t kSlab = size_t{64} << 20;
  if (!arena_on_ || rounded > kSlab / 4) {
    void* p = AlignedZeroed(rounded);
    buffers_.emplace_back(p);
    return p;
  }
  if (slab_ == nullptr || slab_used_ + rounded > kSlab) {
    // A fresh slab: untouched pages stay non-resident; only the 2 MB extent
    // the last matrix ends in can hold unused bytes (at most 2 MB a slab).
    void* p = AllocateStreamed(kSlab);
    buffers_.emplace_back(p);
    slab_ = static_cast<unsigned char*>(p);
    slab_used_ = 0;
  }
  void* p = slab_ + slab_used_;
  slab_used_ += rounded;
  std::memset(p, 0, rounded);
  return p;
}

int FfnDim(const ModelConfig& c, kernels::DType dtype) {
  const int b = kernels::kQ8_0BlockSize;
  return dtype == kernels::DType::kQ8_0 ? (c.hidden_dim + b - 1) / b * b : c.hidden_dim;
}

WeightPlacer::WeightPlacer(Model& model, std::string where) : m_(model), where_(std::move(where)) {
  size_t matrix_bytes = 0;
  for (const ExpectedTensor& t : ExpectedTensors(m_.config))
    if (t.shape.size() == 2) matrix_bytes += static_cast<size_t>(t.shape[0]) * static_cast<size_t>(t.shape[1]);
  // Elements, weighed at one byte each: the smallest dtype's size, so q8_0
  // models qualify as soon as they are big enough for any dtype to.
  if (matrix_bytes >= (size_t{64} << 20)) m_.UseWeightArena();
}

void WeightPlacer::Note(const std::string& text) {
  m_.notes.push_back(text);
  std::fprintf(stderr, "verity: note: %s\n", text.c_str());
}

void WeightPlacer::Finish() {
  if (copied_ > kNamedCopies)
    Note(where_ + ": " + std::to_string(copied_ - kNamedCopies) + " more unaligned tensors copied once (" +
         std::to_string(copied_) + " in all)");
}

Result<const float*> WeightPlacer::Vector(const StoredTensor& t, int64_t count) {
  if (t.block)  // llama.cpp keeps norms in F32; a block-quantized one is not expanded
    return Status::Error(where_ + ": tensor " + t.name + " is " + t.block->name +
                         "; verity reads this vector only in F32, F16 or BF16");
  if (t.type == TensorDType::kF32 && Aligned(t.data, 4)) return reinterpret_cast<const float*>(t.data);
  float* dst = static_cast<float*>(m_.Allocate(static_cast<size_t>(count) * 4));
  ToF32(t.type, t.data, count, dst);  // an unaligned f32 source is copied byte for byte
  if (t.type == TensorDType::kF32 && ++copied_ <= kNamedCopies)
    Note(where_ + ": tensor " + t.name + " is not 4-byte aligned in the file; copied once");
  return static_cast<const float*>(dst);
}

Result<kernels::Weights> WeightPlacer::BlockMatrix(const StoredTensor& t, int rows, int cols, int out_rows,
                                                   int out_cols) {
  if (out_rows != rows || out_cols != cols)
    return Status::Error(where_ + ": tensor " + t.name + " is " + t.block->name + ", which cannot be padded to " +
                         std::to_string(out_rows) + " x " + std::to_string(out_cols) +
                         " for q8_0's FFN width; load it with --dtype f32");
  if (t.mapped) Prefault(t.data, t.block->RowBytes(cols) * static_cast<size_t>(rows));
  if (m_.first_block_tensor.empty()) m_.first_block_tensor = t.name + " (" + t.block->name + ")";
  const std::string type = t.block->name;
  auto at = std::lower_bound(m_.block_types.begin(), m_.block_types.end(), type);
  if (at == m_.block_types.end() || *at != type) {
    m_.block_types.insert(at, type);
    m_.first_of_each_block_type.push_back({t.block->ggml_type, type, t.name});
  }
  return kernels::Weights{kernels::DType::kBlock, t.data, rows, cols, t.block};
}

Result<kernels::Weights> WeightPlacer::Matrix(const StoredTensor& t, int rows, int cols, int out_rows, int out_cols) {
  if (t.block) return BlockMatrix(t, rows, cols, out_rows, out_cols);
  const kernels::DType dtype = m_.dtype;
  if (dtype == kernels::DType::kQ8_0 && out_cols % kernels::kQ8_0BlockSize != 0)
    return Status::Error(where_ + ": dtype q8_0 needs every matrix's columns to be a multiple of " +
                         std::to_string(kernels::kQ8_0BlockSize) + ", but tensor " + t.name + " has " +
                         std::to_string(cols) + " (use f32 or bf16)");
  const size_t src_row_bytes = StoredRowBytes(t.type, cols);
  // The SIMD kernels stream rows with 32- and 64-byte loads: a matrix used in
  // place must start 32-byte aligned (its rows then stay aligned whenever a
  // row is a multiple of 32 bytes), or most loads straddle two cache lines.
  // llama2.c's 28-byte header leaves every tensor at 28 mod 64; measured on
  // the ~110M synth, 1 thread: decoding from it in place ran at 67 tok/s,
  // from the same weights 32-byte aligned (its GGUF) at 103 tok/s.
  const size_t align = kInPlaceAlignment;
  const bool padded = out_rows != rows || out_cols != cols;
  if (SameAs(t.type, dtype) && !padded && Aligned(t.data, align)) {  // in place
    if (t.mapped) Prefault(t.data, kernels::RowBytes(dtype, cols) * rows);
    return kernels::Weights{dtype, t.data, rows, cols};
  }

  const size_t row_bytes = kernels::RowBytes(dtype, out_cols);
  unsigned char* dst = static_cast<unsigned char*>(m_.Allocate(row_bytes * out_rows));  // zeros: the padding
  // Rows [r0, r1) from the source to dst; each row's bytes depend on that row
  // alone, so any split over threads gives the same matrix.
  auto convert = [&](int64_t r0, int64_t r1) {
    std::vector<float> f32(out_cols, 0.0f);  // one row, zero tail
    for (int64_t i = r0; i < r1; i++) {
      const unsigned char* src = t.data + static_cast<size_t>(i) * src_row_bytes;
      unsigned char* out = dst + static_cast<size_t>(i) * row_bytes;
      if (SameAs(t.type, dtype) && !padded) {
        std::memcpy(out, src, row_bytes);  // stored as wanted, only misaligned
      } else if (t.type == TensorDType::kQ8_0 && dtype == kernels::DType::kQ8_0 && !padded) {
        RepackGgufQ8_0(src, cols, out);  // exact: the same int8, the f16 scale widened
      } else if (t.type == TensorDType::kBF16 && !padded) {
        uint16_t* bf = reinterpret_cast<uint16_t*>(f32.data());  // scratch: cols x 2 bytes fit in it
        std::memcpy(bf, src, static_cast<size_t>(cols) * 2);
        kernels::EncodeBF16(dtype, bf, 1, cols, out);
      } else {
        ToF32(t.type, src, cols, f32.data());
        kernels::EncodeF32(dtype, f32.data(), 1, out_cols, out);
      }
    }
  };
  // The source is never read again once copied or converted: hand its pages
  // back a batch at a time, so the resident peak holds the copy and one
  // batch: 4 MB of source on up to 2 threads (as on one before 2026-12-07, so
  // a 2-core box's peak RSS does not move), else 4 MB a thread, at most 256
  // MB. Within a batch the rows are split over the load's threads
  // (base/host_parallel.h) in grains of 256 KB: each thread gets ~16 of them,
  // so starting and joining the threads of each batch (tens of microseconds)
  // stays small beside its work (a few milliseconds a thread).
  const int threads = LoadThreads();
  const size_t row_src = std::max<size_t>(src_row_bytes, 1);
  const size_t batch_bytes = threads <= 2 ? size_t{4} << 20 : static_cast<size_t>(std::min(threads, 64)) << 22;
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>((size_t{256} << 10) / row_src));
  const int64_t batch = std::max<int64_t>(grain, static_cast<int64_t>(batch_bytes / row_src));
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data);
  uintptr_t from = base;  // the source before this is dealt with (page_release.h)
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t r1 = std::min<int64_t>(rows, r0 + batch);
    ParallelRanges(r1 - r0, grain, threads, [&](int64_t b, int64_t e) { convert(r0 + b, r0 + e); });
    if (!t.mapped) continue;
    const PageRelease r = NextPageRelease(base, from, base + static_cast<uintptr_t>(r1) * src_row_bytes, page);
    // The mapping is private and read-only: a later read would only fault
    // the pages in again from the file.
    if (r.end > r.begin) madvise(reinterpret_cast<void*>(r.begin), r.end - r.begin, MADV_DONTNEED);
    from = r.next;
  }
  if (SameAs(t.type, dtype) && !padded && ++copied_ <= kNamedCopies)
    Note(where_ + ": tensor " + t.name + " is not " + std::to_string(align) + "-byte aligned in the file; copied once");
  return kernels::Weights{dtype, dst, out_rows, out_cols};
}

Footprint FootprintOf(const Model& m, int kv_positions) {
  const ModelConfig& c = m.config;
  Footprint f;
  const size_t dim_bytes = static_cast<size_t>(c.dim) * 4;
  size_t norms = dim_bytes;  // final norm
  size_t per_token = 0, resident = 0;
  for (const LayerWeights& l : m.layers) {
    norms += 2 * dim_bytes;
    if (l.bq) norms += static_cast<size_t>(c.q_dim() + 2 * c.kv_dim()) * 4;  // Qwen2's biases
    if (l.q_norm) norms += static_cast<size_t>(2 * c.head_dim) * 4;          // Qwen3's q/k norms
    if (l.post_att_norm) norms += 2 * dim_bytes;                             // Gemma's output norms
    const size_t attn = l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes();
    per_token += attn;
    resident += attn;
    if (c.n_experts > 0) {
      size_t all = 0;
      for (const ExpertWeights& e : l.experts) all += e.w1.bytes() + e.w2.bytes() + e.w3.bytes();
      per_token += l.router.bytes() + all / c.n_experts * c.n_experts_per_tok;
      resident += l.router.bytes() + all;
    } else {
      per_token += l.w1.bytes() + l.w2.bytes() + l.w3.bytes();
      resident += l.w1.bytes() + l.w2.bytes() + l.w3.bytes();
    }
  }
  const bool blocks = m.token_embedding == nullptr;  // a block-quantized table (Model::embedding_blocks)
  const size_t embedding = blocks ? m.embedding_blocks.bytes() : static_cast<size_t>(c.vocab_size) * dim_bytes;
  const void* table = blocks ? m.embedding_blocks.data : m.token_embedding;
  per_token += norms + dim_bytes + m.classifier.bytes();
  resident += norms + embedding + (m.classifier.data == table ? 0 : m.classifier.bytes());
  f.weight_bytes_per_token = per_token;
  f.resident_weight_bytes = resident;
  const int positions = kv_positions > 0 ? kv_positions : c.seq_len;
  f.kv_cache_bytes = 2 * static_cast<size_t>(c.n_layers) * positions * c.kv_dim() * 4;
  return f;
}

}  // namespace verity
