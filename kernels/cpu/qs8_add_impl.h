// The QS8 add loop, included by each nhwc_ukernels_<isa>.cpp inside its anonymous namespace so
// the compiler vectorizes it for that ISA; integer only, so every ISA gives the same bytes.
// (internal header: no include guard on purpose, one inclusion per file)

// The parameters are copied first: a store through `out` could alias them, which would make the
// compiler reload them per element and keep the loop scalar.
inline void qs8_add_loop(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddParams& params) {
  const Qs8AddParams p = params;
  const int32_t round = int32_t(1) << (p.shift - 1);
  for (int64_t i = 0; i < n; ++i) {
    int32_t acc = (int32_t(a[i]) - p.a_zero_point) * p.a_mul + (int32_t(b[i]) - p.b_zero_point) * p.b_mul + round;
    int32_t q = (acc >> p.shift) + p.out_zero_point;
    q = q < p.out_min ? p.out_min : q;
    q = q > p.out_max ? p.out_max : q;
    out[i] = static_cast<int8_t>(q);
  }
}
