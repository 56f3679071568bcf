// The transforms of Winograd's F(2x2, 3x3) convolution over channels-last data, included by each
// nhwc_ukernels_<isa>.cpp inside its anonymous namespace so every copy is built for that file's
// ISA (internal header: no include guard on purpose, one inclusion per file). A 3x3 filter over
// a 4x4 input patch gives a 2x2 output tile; in the transformed domain the 9 x 4 multiply-adds
// per channel pair become 16 (2.25 times fewer), one per position of a 4x4 grid, each position
// an ordinary GEMM over channels:
//   V = B^T d B (input patch d),  U = G g G^T (filter g, at pack time),  y = A^T (V . U) A
// with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
// A^T = [1 1 1 0; 0 1 -1 -1]. Only additions and subtractions here; the halves of G are exact.
template <int W>
struct WinoVec {
  typedef float type __attribute__((vector_size(W * 4)));
  static type load(const float* p) {
    type v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, type v) { __builtin_memcpy(p, &v, sizeof v); }
};

// V[pos][c] for c < kc, pos = 4 * row + col of the 4x4 grid: v + pos * pos_stride + c. src[pos]
// points at the input pixel's channels (a zero row for padding).
template <int W>
void wino_f23_input(const float* const* src, int64_t kc, float* v, int64_t pos_stride) {
  using Vec = WinoVec<W>;
  using T = typename Vec::type;
  int64_t c = 0;
  const auto step = [&](auto load, auto store) {
    T d[16], r[16];
    for (int p = 0; p < 16; ++p) d[p] = load(src[p] + c);
    for (int j = 0; j < 4; ++j) {  // B^T d: along each column
      r[0 + j] = d[0 + j] - d[8 + j];
      r[4 + j] = d[4 + j] + d[8 + j];
      r[8 + j] = d[8 + j] - d[4 + j];
      r[12 + j] = d[4 + j] - d[12 + j];
    }
    for (int i = 0; i < 16; i += 4) {  // (B^T d) B: along each row
      store(v + (i + 0) * pos_stride + c, r[i + 0] - r[i + 2]);
      store(v + (i + 1) * pos_stride + c, r[i + 1] + r[i + 2]);
      store(v + (i + 2) * pos_stride + c, r[i + 2] - r[i + 1]);
      store(v + (i + 3) * pos_stride + c, r[i + 1] - r[i + 3]);
    }
  };
  for (; c + W <= kc; c += W) step(Vec::load, Vec::store);
  for (; c < kc; ++c) step([](const float* p) { return T{} + *p; }, [](float* p, T x) { *p = x[0]; });
}

// The 2x2 output tile from M[pos][c] (m + pos * pos_stride + c) for c < nc: y = A^T M A, clamped
// to [lo, hi]. dst[2 * row + col] is the output pixel's channels, or null outside the image.
template <int W>
void wino_f23_output(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi) {
  using Vec = WinoVec<W>;
  using T = typename Vec::type;
  int64_t c = 0;
  const auto step = [&](auto load, auto store) {
    T x[16], s[8];
    for (int p = 0; p < 16; ++p) x[p] = load(m + p * pos_stride + c);
    for (int j = 0; j < 4; ++j) {  // A^T M: along each column
      s[j] = x[0 + j] + x[4 + j] + x[8 + j];
      s[4 + j] = x[4 + j] - x[8 + j] - x[12 + j];
    }
    const T lov = T{} + lo, hiv = T{} + hi;
    for (int i = 0; i < 2; ++i) {  // (A^T M) A: along each row
      const T* r = s + 4 * i;
      T y0 = r[0] + r[1] + r[2], y1 = r[1] - r[2] - r[3];
      // max then min, NaN-preserving as the GEMM kernels' clamp: a NaN sum stays NaN.
      y0 = y0 < lov ? lov : y0;
      y0 = y0 > hiv ? hiv : y0;
      y1 = y1 < lov ? lov : y1;
      y1 = y1 > hiv ? hiv : y1;
      if (dst[2 * i] != nullptr) store(dst[2 * i] + c, y0);
      if (dst[2 * i + 1] != nullptr) store(dst[2 * i + 1] + c, y1);
    }
  };
  for (; c + W <= nc; c += W) step(Vec::load, Vec::store);
  for (; c < nc; ++c) step([](const float* p) { return T{} + *p; }, [](float* p, T x) { *p = x[0]; });
}
