//! Trino's math functions (`math.md`) that DataFusion lacks or names otherwise:
//! `e`, `nan`, `infinity`, `is_finite`, `is_infinite`, `from_base`, `to_base`,
//! `width_bucket`, `normal_cdf`, `inverse_normal_cdf`, `wilson_interval_lower` and
//! `_upper` (the ones named otherwise, `ceiling`, `sign`, `truncate`, `is_nan`, are
//! aliases registered in `functions`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};

use super::invalid_argument;
use super::simple::function;

fn floats(a: &ArrayRef) -> Result<Float64Array> {
    Ok(cast(a, &DataType::Float64)?.as_primitive::<Float64Type>().clone())
}

use super::simple::int64 as ints;

fn constant(value: f64) -> ArrayRef {
    Arc::new(Float64Array::from(vec![value]))
}

pub fn functions() -> Vec<ScalarUDF> {
    let n = |k| Signature::any(k, Volatility::Immutable);
    let nullary = || Signature::nullary(Volatility::Immutable);
    let double = |_: &[DataType]| Ok(DataType::Float64);
    let boolean = |_: &[DataType]| Ok(DataType::Boolean);
    vec![
        function("e", nullary(), double, |_| Ok(constant(std::f64::consts::E))),
        function("nan", nullary(), double, |_| Ok(constant(f64::NAN))),
        function("infinity", nullary(), double, |_| Ok(constant(f64::INFINITY))),
        function("is_finite", n(1), boolean, |a| {
            Ok(Arc::new(floats(&a[0])?.iter().map(|x| x.map(f64::is_finite)).collect::<BooleanArray>()) as ArrayRef)
        }),
        function("is_infinite", n(1), boolean, |a| {
            Ok(Arc::new(floats(&a[0])?.iter().map(|x| x.map(f64::is_infinite)).collect::<BooleanArray>()) as ArrayRef)
        }),
        function("from_base", n(2), |_| Ok(DataType::Int64), from_base),
        function("to_base", n(2), |_| Ok(DataType::Utf8), to_base),
        function("width_bucket", n(4), |_| Ok(DataType::Int64), width_bucket),
        function("normal_cdf", n(3), double, normal_cdf),
        function("inverse_normal_cdf", n(3), double, inverse_normal_cdf),
        function("wilson_interval_lower", n(3), double, |a| wilson(a, -1.0)),
        function("wilson_interval_upper", n(3), double, |a| wilson(a, 1.0)),
    ]
}

fn radix(r: i64) -> Result<u32> {
    match r {
        2..=36 => Ok(r as u32),
        _ => Err(invalid_argument(format!("Radix must be between 2 and 36: {r}"))),
    }
}

fn from_base(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = cast(&args[0], &DataType::Utf8)?;
    let (text, radixes) = (text.as_string::<i32>(), ints(&args[1])?);
    let out: Int64Array = (0..text.len())
        .map(|i| {
            if text.is_null(i) || radixes.is_null(i) {
                return Ok(None);
            }
            let t = text.value(i);
            i64::from_str_radix(t, radix(radixes.value(i))?)
                .map(Some)
                .map_err(|_| invalid_argument(format!("Not a valid base-{} number: {t}", radixes.value(i))))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

fn to_base(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (values, radixes) = (ints(&args[0])?, ints(&args[1])?);
    let out: StringArray = (0..values.len())
        .map(|i| {
            if values.is_null(i) || radixes.is_null(i) {
                return Ok(None);
            }
            let r = radix(radixes.value(i))?;
            let (negative, mut n) = (values.value(i) < 0, values.value(i).unsigned_abs());
            let mut digits = Vec::new();
            loop {
                digits.push(std::char::from_digit((n % r as u64) as u32, r).unwrap_or('?'));
                n /= r as u64;
                if n == 0 {
                    break;
                }
            }
            if negative {
                digits.push('-');
            }
            Ok(Some(digits.into_iter().rev().collect::<String>()))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// The bucket of `x` among `n` equal buckets from `low` to `high` (0 below, n + 1 above).
fn width_bucket(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (x, low, high, n) = (floats(&args[0])?, floats(&args[1])?, floats(&args[2])?, ints(&args[3])?);
    let out: Int64Array = (0..x.len())
        .map(|i| {
            if [x.is_null(i), low.is_null(i), high.is_null(i), n.is_null(i)].contains(&true) {
                return Ok(None);
            }
            let (v, lo, hi, k) = (x.value(i), low.value(i), high.value(i), n.value(i));
            if k <= 0 || lo == hi || !lo.is_finite() || !hi.is_finite() || v.is_nan() {
                return Err(invalid_argument("width_bucket needs a positive bucket count and distinct finite bounds"));
            }
            let (lo, hi, v) = if lo < hi { (lo, hi, v) } else { (-lo, -hi, -v) };
            Ok(Some(if v < lo {
                0
            } else if v >= hi {
                k + 1
            } else {
                ((v - lo) / (hi - lo) * k as f64).floor() as i64 + 1
            }))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// The error function, to double precision (W. J. Cody's rational approximations
/// are more than needed here: a Chebyshev fit of erfc accurate to 1.2e-7 is not, so
/// this sums the series near 0 and the continued fraction beyond).
fn erf(x: f64) -> f64 {
    if x.abs() < 2.5 {
        // Maclaurin series: 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)).
        let (mut term, mut sum, x2) = (x, x, x * x);
        for n in 1..200 {
            term *= -x2 / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        return sum * 2.0 / std::f64::consts::PI.sqrt();
    }
    // erfc by its continued fraction (Lentz), for |x| >= 2.5.
    let a = x.abs();
    let mut f = a;
    let (mut c, mut d) = (a, 0.0);
    for n in 1..300 {
        let an = n as f64 / 2.0;
        d = 1.0 / (a + an * d);
        c = a + an / c;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    let erfc = (-a * a).exp() / (f * std::f64::consts::PI.sqrt());
    if x > 0.0 {
        1.0 - erfc
    } else {
        erfc - 1.0
    }
}

fn normal_cdf(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (mean, sd, v) = (floats(&args[0])?, floats(&args[1])?, floats(&args[2])?);
    let out: Float64Array = (0..v.len())
        .map(|i| {
            if mean.is_null(i) || sd.is_null(i) || v.is_null(i) {
                return Ok(None);
            }
            if sd.value(i) <= 0.0 {
                return Err(invalid_argument("standardDeviation must be > 0"));
            }
            let z = (v.value(i) - mean.value(i)) / (sd.value(i) * std::f64::consts::SQRT_2);
            Ok(Some(0.5 * (1.0 + erf(z))))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// The standard normal quantile: Acklam's approximation refined by one Halley step.
fn probit(p: f64) -> f64 {
    let a = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.38357751867269e+02,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    let b = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    let c = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    let d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00];
    let tail = |q: f64| {
        (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
            / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0)
    };
    let e = 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2)) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

fn inverse_normal_cdf(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (mean, sd, p) = (floats(&args[0])?, floats(&args[1])?, floats(&args[2])?);
    let out: Float64Array = (0..p.len())
        .map(|i| {
            if mean.is_null(i) || sd.is_null(i) || p.is_null(i) {
                return Ok(None);
            }
            if !(0.0..1.0).contains(&p.value(i)) || p.value(i) == 0.0 {
                return Err(invalid_argument("p must be 0 > p > 1"));
            }
            if sd.value(i) <= 0.0 {
                return Err(invalid_argument("sd must be > 0"));
            }
            Ok(Some(mean.value(i) + sd.value(i) * probit(p.value(i))))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// The Wilson score interval's bound for `successes` of `trials` at score `z`.
fn wilson(args: &[ArrayRef], side: f64) -> Result<ArrayRef> {
    let (s, n, z) = (floats(&args[0])?, floats(&args[1])?, floats(&args[2])?);
    let out: Float64Array = (0..s.len())
        .map(|i| {
            if s.is_null(i) || n.is_null(i) || z.is_null(i) {
                return Ok(None);
            }
            let (s, n, z) = (s.value(i), n.value(i), z.value(i));
            if n <= 0.0 || s < 0.0 || s > n || z < 0.0 {
                return Err(invalid_argument("wilson interval needs 0 <= successes <= trials, trials > 0, z >= 0"));
            }
            let p = s / n;
            let center = p + z * z / (2.0 * n);
            let spread = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
            Ok(Some((center + side * spread) / (1.0 + z * z / n)))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

#[cfg(test)]
mod tests {
    #[test]
    fn erf_and_probit_agree_with_known_values() {
        // erf(1) and the 97.5% normal quantile, to 12 digits.
        assert!((super::erf(1.0) - 0.842700792949715).abs() < 1e-12);
        assert!((super::erf(3.0) - 0.999977909503001).abs() < 1e-12);
        assert!((super::probit(0.975) - 1.959963984540054).abs() < 1e-9);
    }
}
