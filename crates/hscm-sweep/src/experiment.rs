//! One shape for every experiment the `hscm` binary runs: its flags are a clap group,
//! its run returns serialisable data, and its text renderer prints that data for
//! people. The binary only picks the experiment and calls [`run_and_print`]; the
//! report calls [`Experiment::run`] and reads the data.

/// An experiment, as the flag group that parameterises it.
pub trait Experiment: clap::Args {
    /// What a run measured: its JSON (`--json`) is the stable contract.
    type Output: serde::Serialize;

    /// Whether JSON was asked for (which also silences progress output).
    fn json(&self) -> bool;

    /// Runs the experiment.
    fn run(&self) -> anyhow::Result<Self::Output>;

    /// Prints a run's result as text for people.
    fn print(&self, out: &Self::Output) -> anyhow::Result<()>;
}

/// Runs `experiment` and prints its result, as JSON or as text.
pub fn run_and_print<E: Experiment>(experiment: &E) -> anyhow::Result<()> {
    let out = experiment.run()?;
    crate::out::emit(&out, experiment.json(), |o| experiment.print(o))
}
