//! The ring benchmark's text tables.

use super::*;

pub fn print(r: &RingReport) -> anyhow::Result<()> {
    outln!(
        "shared-memory ring vs memcpy (interface) vs Unix socket; random reads over {}, split {}",
        human_bytes(r.volume_size),
        human_bytes(r.split)
    )?;
    outln!(
        "{:>8} {:>3} {:<9} {:>10} {:>10} {:>9} {:>8} {:>8} | {:>8} {:>8} {:>10}",
        "chunk",
        "qd",
        "mode",
        "ring MB/s",
        "memcpy",
        "overhead",
        "p50 µs",
        "p99 µs",
        "uds p50",
        "uds p99",
        "uds ops/s"
    )?;
    for row in &r.rows {
        let u = r.uds_for(row);
        let [chunk, qd, mode, ring, memcpy, overhead] = row.lead_cells();
        outln!(
            "{chunk:>8} {qd:>3} {mode:<9} {ring:>10} {memcpy:>10} {overhead:>9} {:>8.2} {:>8.2} | {:>8} {:>8} {:>10}",
            row.p50_us,
            row.p99_us,
            u.map_or("-".into(), |u| format!("{:.2}", u.p50_us)),
            u.map_or("-".into(), |u| format!("{:.2}", u.p99_us)),
            u.map_or("-".into(), |u| format!("{:.0}", u.ops_per_s)),
        )?;
    }
    let fastest_read = r
        .rows
        .iter()
        .filter(|row| row.qd == 1)
        .map(|row| row.read_and_copy_ns().0)
        .filter(|ns| ns.is_finite())
        .reduce(f64::min);
    let trip_text = |ns: f64| {
        round_trip_unmeasurable(ns, fastest_read).unwrap_or_else(|| format!("{ns:.0} ns"))
    };
    outln!(
        "bare core-to-core round trip (the QD1 floor): {} before the rows, {} after",
        trip_text(r.core_round_trip_ns[0]),
        trip_text(r.core_round_trip_ns[1])
    )?;
    let parts: Vec<_> = r
        .rows
        .iter()
        .filter_map(|row| Some((row, row.overhead_parts()?)))
        .collect();
    if !parts.is_empty() {
        outln!("\nwhere a QD1 in-place read's time goes beyond its copy (ns; cached = same read and copy of a cache-resident range):")?;
        outln!(
            "{:>8} {:>8} {:>8} {:>8} {:>13} {:>11} {:>9} {:>15}",
            "chunk",
            "read",
            "copy",
            "over",
            "cached over",
            "round trip",
            "software",
            "exposed misses"
        )?;
        for (row, p) in parts {
            let (read, copy) = row.read_and_copy_ns();
            if let Some(why) = p.unmeasurable(read) {
                outln!(
                    "{:>8} {:>8.0} {:>8.0} {:>8.0}  not measurable in this run: {why}",
                    human_bytes(row.chunk),
                    read,
                    copy,
                    p.over
                )?;
                continue;
            }
            outln!(
                "{:>8} {:>8.0} {:>8.0} {:>8.0} {:>13.0} {:>11.0} {:>9.0} {:>15.0}",
                human_bytes(row.chunk),
                read,
                copy,
                p.over,
                p.cached_over,
                p.round_trip,
                p.software(),
                p.exposed_misses()
            )?;
        }
    }
    if !r.db_sweep.is_empty() {
        outln!("\ndata-buffer size sweep, QD4 (MB/s):")?;
        let (dbs, grid) = r.db_grid();
        out!("{:>8}", "chunk")?;
        for d in &dbs {
            out!(" {:>9}", human_bytes(*d))?;
        }
        outln!()?;
        for (c, mbps) in grid {
            out!("{:>8}", human_bytes(c))?;
            for v in mbps {
                out!(" {v:>9.0}")?;
            }
            outln!()?;
        }
    }
    Ok(())
}
