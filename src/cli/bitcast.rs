//! `dtcast bitcast`: the shape rule of a bitcast.

use std::io::Write;

use dtcast_bitcast::{Rule, View, Xla};

use super::args::{BitcastArgs, RuleName};
use super::CmdError;

pub(crate) fn run(args: &BitcastArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let rule: &dyn Rule = match args.rule {
        RuleName::View => &View,
        RuleName::Xla => &Xla,
    };
    let shape = rule.infer(&args.shape.0, args.from, args.to)?;
    writeln!(out, "{shape:?}")?;
    Ok(())
}
