//! `exp`, `log`, `log1p` and `log2` in Rust, so that the binary needs no libm.
//!
//! They are the only libm functions the binary calls (the metrics exporter's summaries and
//! native histograms use them; the daemon configures neither, so at run time nothing calls
//! them). Yet linking them maps libm into the process: 0.3 MiB of idle RSS for four functions
//! never called. `src/main.rs` defines the C symbols from these, so the linker resolves them
//! in the binary and drops libm from its dependencies (`--as-needed`).
//!
//! Each is within 2 ulp of glibc's over the normal range (tests below compare them); results
//! that are subnormal are rounded twice, which only matters below 2.2e-308.

/// ln 2 split in two: the high part has 32 trailing zero bits, so `k * LN2_HI` is exact
/// for every exponent `k` a double has.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
/// ln 2 minus [`LN2_HI`].
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// 1 / ln 2.
const LOG2_E: f64 = std::f64::consts::LOG2_E;

/// `x = 2^k * m` with `m` in [sqrt(2)/2, sqrt(2)), for finite `x > 0`; `Err` holds the
/// logarithm of every other input (NaN, negative, zero, infinity).
fn split(x: f64) -> Result<(i32, f64), f64> {
    if x.is_nan() || x < 0.0 {
        return Err(f64::NAN);
    }
    if x == 0.0 {
        return Err(f64::NEG_INFINITY);
    }
    if x == f64::INFINITY {
        return Err(x);
    }
    let (mut bits, mut k) = (x.to_bits(), 0);
    if bits >> 52 == 0 {
        // Subnormal: scale by 2^54 (exact) into the normal range first.
        bits = (x * f64::from_bits(0x4350_0000_0000_0000)).to_bits();
        k = -54;
    }
    k += ((bits >> 52) as i32) - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        k += 1;
    }
    Ok((k, m))
}

/// ln m for m in [sqrt(2)/2, sqrt(2)): with f = m - 1 (exact) and s = f / (2 + f),
/// |s| < 0.172, ln m = 2 atanh(s) = 2s + R, R = 2s (s^2/3 + s^4/5 + ...) (12 terms leave
/// under 1e-19). As 2s = f - s f, that is f - s (f - R'), R' = R / s: f, exact, carries
/// most of the result and the rounding errors are all in the smaller correction.
fn ln_reduced(m: f64) -> f64 {
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let mut p = 0.0;
    for i in (1..13).rev() {
        p = (p + 1.0 / f64::from(2 * i + 1)) * z;
    }
    f - s * (f - 2.0 * p)
}

/// Natural logarithm (C `log`).
pub fn log(x: f64) -> f64 {
    match split(x) {
        Ok((k, m)) => {
            let k = f64::from(k);
            k * LN2_HI + (ln_reduced(m) + k * LN2_LO)
        }
        Err(special) => special,
    }
}

/// Base-2 logarithm (C `log2`); exact for powers of two.
pub fn log2(x: f64) -> f64 {
    match split(x) {
        Ok((k, m)) => f64::from(k) + ln_reduced(m) * LOG2_E,
        Err(special) => special,
    }
}

/// ln(1 + x), accurate for small `x` (C `log1p`).
pub fn log1p(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    let u = 1.0 + x;
    if u == 1.0 {
        // |x| below half an ulp of 1: ln(1 + x) is x (this keeps -0.0 too).
        return x;
    }
    // u - 1 is exact, and u differs from 1 + x by the rounding of that sum: scaling ln u by
    // x / (u - 1) corrects for it (Goldberg, "What every computer scientist should know
    // about floating-point arithmetic", theorem 4).
    log(u) * (x / (u - 1.0))
}

/// e^x (C `exp`).
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_384 {
        return f64::INFINITY;
    }
    if x < -745.133_219_101_941_2 {
        return 0.0;
    }
    // x = k ln 2 + r, |r| <= ln 2 / 2 (plus rounding), then e^x = 2^k e^r.
    let kf = x * LOG2_E;
    let k = if kf >= 0.0 { kf + 0.5 } else { kf - 0.5 } as i32;
    let r = (x - f64::from(k) * LN2_HI) - f64::from(k) * LN2_LO;
    // e^r by its Taylor series, 14 terms (the first left out is under 4e-18), nested:
    // 1 + r (1 + r/2 (1 + r/3 (...))).
    let mut p = 1.0;
    for i in (1..14).rev() {
        p = 1.0 + r * p / f64::from(i);
    }
    scale(p, k)
}

/// `y * 2^k` for `k` in [-1076, 1025] (what [`exp`] produces).
fn scale(y: f64, k: i32) -> f64 {
    let pow2 = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    if k > 1023 {
        y * pow2(1023) * pow2(k - 1023)
    } else if k < -1022 {
        y * pow2(-1022) * pow2(k + 1022)
    } else {
        y * pow2(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in ulps between two finite doubles of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// Deterministic inputs: xorshift64 bits mapped onto `lo..hi`.
    fn inputs(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f64> {
        let mut s = 0x9e37_79b9_7f4a_7c15_u64;
        (0..n).map(move |_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
    }

    /// The largest ulp distance from glibc's function (the lib's test binary links libm:
    /// only the `edgenetd` binary defines these symbols itself).
    fn worst(ours: fn(f64) -> f64, glibc: fn(f64) -> f64, xs: impl Iterator<Item = f64>) -> u64 {
        xs.map(|x| {
            let (a, b) = (ours(x), glibc(x));
            assert_eq!(a.is_sign_negative(), b.is_sign_negative(), "sign at {x:e}");
            ulps(a, b)
        })
        .max()
        .unwrap()
    }

    #[test]
    fn log_is_within_2_ulp_of_glibc() {
        let wide = inputs(-700.0, 700.0, 20_000).map(f64::exp);
        assert!(worst(log, f64::ln, wide) <= 2);
        assert!(worst(log, f64::ln, inputs(0.5, 2.0, 20_000)) <= 2);
        assert!(worst(log, f64::ln, inputs(1e-310, 1e-300, 1000)) <= 2);
    }

    #[test]
    fn log2_is_within_2_ulp_of_glibc_and_exact_on_powers_of_two() {
        let wide = inputs(-700.0, 700.0, 20_000).map(f64::exp);
        assert!(worst(log2, f64::log2, wide) <= 2);
        assert!(worst(log2, f64::log2, inputs(0.5, 2.0, 20_000)) <= 2);
        for k in -1074..1024 {
            let bits = if k < -1022 {
                1 << (k + 1074)
            } else {
                ((k + 1023) as u64) << 52
            };
            assert_eq!(log2(f64::from_bits(bits)), f64::from(k), "2^{k}");
        }
    }

    #[test]
    fn log1p_is_within_2_ulp_of_glibc() {
        assert!(worst(log1p, f64::ln_1p, inputs(-0.999, 1.0, 20_000)) <= 2);
        assert!(worst(log1p, f64::ln_1p, inputs(1e-12, 1e-6, 5000)) <= 2);
        assert!(worst(log1p, f64::ln_1p, inputs(1.0, 1e300, 5000)) <= 2);
        // The gamma of the metrics exporter's summaries: ln(1 + 2a/(1-a)), a = 0.0001.
        let a = 0.0001;
        assert!(ulps(log1p(2.0 * a / (1.0 - a)), (2.0 * a / (1.0 - a)).ln_1p()) <= 1);
    }

    #[test]
    fn exp_is_within_2_ulp_of_glibc() {
        assert!(worst(exp, f64::exp, inputs(-708.0, 709.7, 40_000)) <= 2);
        assert!(worst(exp, f64::exp, inputs(-1.0, 1.0, 20_000)) <= 2);
    }

    #[test]
    fn special_values_are_c_s() {
        for f in [log, log2] {
            assert!(f(-1.0).is_nan() && f(f64::NAN).is_nan() && f(f64::NEG_INFINITY).is_nan());
            assert_eq!(f(0.0), f64::NEG_INFINITY);
            assert_eq!(f(-0.0), f64::NEG_INFINITY);
            assert_eq!(f(f64::INFINITY), f64::INFINITY);
            assert_eq!(f(1.0).to_bits(), 0.0f64.to_bits());
        }
        assert!(log1p(-2.0).is_nan() && log1p(f64::NAN).is_nan());
        assert_eq!(log1p(-1.0), f64::NEG_INFINITY);
        assert_eq!(log1p(f64::INFINITY), f64::INFINITY);
        assert_eq!(log1p(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(log1p(f64::MAX), f64::MAX.ln());
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(-746.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
    }
}
