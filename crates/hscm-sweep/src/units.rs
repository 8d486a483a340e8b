//! Sizes as people type them: 4G, 1M, 64k, 1000 (binary multiples: 1k = 1024).

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("{s:?}: a size cannot be negative"));
    }
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let not_a_size = || format!("{s:?} is not a size (examples: 1000, 4k, 1M, 1.5G, 8G)");
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use k, M, G or T)"
            ))
        }
    };
    let too_large = || format!("{s:?} is too large");
    match num.split_once('.') {
        None => num
            .parse::<u64>()
            .map_err(|_| not_a_size())?
            .checked_mul(1 << shift)
            .ok_or_else(too_large),
        // A fraction (1.5G) must come to a whole number of bytes.
        Some((whole, frac)) => {
            if frac.is_empty() || frac.contains('.') || (whole.is_empty() && frac.is_empty()) {
                return Err(not_a_size());
            }
            if !frac.bytes().all(|b| b.is_ascii_digit()) {
                return Err(not_a_size());
            }
            // Trailing zeros say nothing; more than 38 other decimals overflow the
            // scale, and no whole number of bytes has that many (at most 40 halvings).
            let frac = frac.trim_end_matches('0');
            let not_whole = || format!("{s:?} is not a whole number of bytes");
            let scale = u32::try_from(frac.len())
                .ok()
                .and_then(|n| 10u128.checked_pow(n))
                .ok_or_else(not_whole)?;
            let digits: u128 = format!("{whole}{frac}").parse().map_err(|_| not_a_size())?;
            let bytes = digits.checked_mul(1u128 << shift).ok_or_else(too_large)?;
            if bytes % scale != 0 {
                return Err(format!("{s:?} is not a whole number of bytes"));
            }
            u64::try_from(bytes / scale).map_err(|_| too_large())
        }
    }
}

/// A size as a flag's default is written ("1G", "4k", "1000"): the largest binary unit
/// that divides it, so that `parse_size` reads back the same number.
pub fn size_arg(n: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "k")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// Refuses work whose input asks for more memory than this machine has (RAM and swap),
/// before the allocation would abort the process: `what` says what needs `bytes`.
pub fn ensure_fits_in_memory(what: &str, bytes: u128) -> anyhow::Result<()> {
    if let Some(memory) = hscm_volume::memory_available_for_volumes() {
        anyhow::ensure!(
            bytes <= u128::from(memory),
            "{what} needs about {} of memory; this machine has {}",
            human_bytes(u64::try_from(bytes).unwrap_or(u64::MAX)),
            human_bytes(memory)
        );
    }
    Ok(())
}

/// A number of seconds as a flag takes it: finite, not negative, at most a day.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds from 0 to 86400")),
    }
}

pub use hscm_durable::units::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_finite_and_at_most_a_day() {
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert_eq!(parse_seconds("0"), Ok(0.0));
        for bad in ["-1", "inf", "NaN", "86401", "soon"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_default_written_as_a_size_reads_back_the_same() {
        for n in [0, 1000, 4096, 1 << 30, 3 << 30, (1 << 20) + 4096, 5 << 40] {
            assert_eq!(parse_size(&size_arg(n)), Ok(n), "{}", size_arg(n));
        }
        assert_eq!(size_arg(1 << 30), "1G");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("G").unwrap_err().contains("not a size"));
        assert!(parse_size("4X").unwrap_err().contains("unknown unit"));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("0.5k"), Ok(512));
        assert!(parse_size("1.5").unwrap_err().contains("whole number"));
        assert!(parse_size("-5G").unwrap_err().contains("negative"));
        assert!(parse_size("1..5G").is_err());
        assert!(parse_size("99999999999T")
            .unwrap_err()
            .contains("too large"));
        // Found by the sweep_spec fuzz target: a long fraction overflowed its scale.
        let long = format!("4.{}k", "9".repeat(74));
        assert!(parse_size(&long).unwrap_err().contains("whole number"));
        assert_eq!(parse_size(&format!("1.5{}k", "0".repeat(60))), Ok(1536));
    }
}

/// Counts as people type them, decimal: 5M = 5,000,000, 10k = 10,000.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a count (examples: 1000, 10k, 5M, 1G)"))?;
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1_000,
        "M" | "m" => 1_000_000,
        "G" | "g" => 1_000_000_000,
        other => return Err(format!("unknown suffix {other:?} in {s:?} (use k, M or G)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod count_tests {
    #[test]
    fn counts_are_decimal() {
        assert_eq!(super::parse_count("5M"), Ok(5_000_000));
        assert_eq!(super::parse_count("10_000"), Ok(10_000));
        assert!(super::parse_count("5Q").is_err());
        assert!(super::parse_count("x").is_err());
    }
}
