pub fn reproduce(_o: &std::path::Path, _s: f64, _r: u64, _q: bool) -> anyhow::Result<()> {
    anyhow::bail!("todo")
}
