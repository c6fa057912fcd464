//! `dtcast promote` and `dtcast can-cast`.

use std::io::{BufRead, Write};

use dtcast_promote::{ArrayApi, Jax, NumPy, Operand, Policy, Torch};

use super::args::{CanCastArgs, PolicyArgs, PolicyName, PromoteArgs};
use super::operand::parse_operand;
use super::CmdError;

pub(crate) fn run(
    args: &PromoteArgs,
    stdin: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<(), CmdError> {
    let policy = policy(&args.policy)?;
    if !args.operands.is_empty() {
        writeln!(out, "{}", policy.result_type(&args.operands)?)?;
        return Ok(());
    }
    // Batch mode: one case per line; a failing case prints `error: ...` on its line and the rest go on.
    // The exit status is 1 when any case failed.
    let mut bytes = Vec::new();
    let mut operands: Vec<Operand> = Vec::new();
    let mut failed = 0usize;
    let mut cases = 0usize;
    loop {
        bytes.clear();
        if stdin.read_until(b'\n', &mut bytes)? == 0 {
            return if failed == 0 {
                Ok(())
            } else {
                Err(format!("{failed} of {cases} cases failed").into())
            };
        }
        cases += 1;
        operands.clear();
        // A line that is not UTF-8 is a failed case like any other, not the end of the batch.
        let line = std::str::from_utf8(&bytes).map_err(|e| {
            CmdError::from(format!(
                "line {cases} is not valid UTF-8 (byte {})",
                e.valid_up_to()
            ))
        });
        let case = line.and_then(|line| {
            line.split_whitespace()
                .try_for_each(|word| parse_operand(word).map(|op| operands.push(op)))
                .map_err(CmdError::from)
                .and_then(|()| {
                    if operands.is_empty() {
                        Err(
                            "empty case: expected operands separated by spaces, like `int8[2] 2.5`"
                                .into(),
                        )
                    } else {
                        policy.result_type(&operands).map_err(CmdError::from)
                    }
                })
        });
        match case {
            Ok(dtype) => writeln!(out, "{dtype}")?,
            Err(e) => {
                failed += 1;
                writeln!(out, "error: {e}")?
            }
        }
    }
}

pub(crate) fn can_cast(args: &CanCastArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let policy = policy(&args.policy)?;
    for dtype in [args.from, args.to] {
        if !policy.has_dtype(dtype) {
            return Err(format!("{dtype} is not a {} dtype", policy.name()).into());
        }
    }
    let allowed = match args.casting {
        Some(casting) => policy.can_cast_with(args.from, args.to, casting),
        None => policy.can_cast(args.from, args.to),
    };
    writeln!(out, "{allowed}")?;
    Ok(())
}

/// The policy the flags name.
pub(crate) fn policy(args: &PolicyArgs) -> Result<Box<dyn Policy>, CmdError> {
    let fixed = |policy: Box<dyn Policy>| -> Result<Box<dyn Policy>, CmdError> {
        match args.default_dtype {
            None => Ok(policy),
            Some(_) => Err(
                "--default-dtype is torch's: JAX's default dtype follows x64 \
                 (--policy jax: float64, jax-no-x64: float32) and NumPy's and the Array API's \
                 are float64"
                    .into(),
            ),
        }
    };
    match args.policy {
        PolicyName::Torch => Ok(Box::new(Torch::new(
            args.default_dtype.unwrap_or(dtcast_dtype::DType::Float32),
        )?)),
        PolicyName::Jax => fixed(Box::<Jax>::default()),
        PolicyName::JaxNoX64 => fixed(Box::new(Jax::without_x64())),
        PolicyName::Numpy => fixed(Box::new(NumPy)),
        PolicyName::ArrayApi => fixed(Box::new(ArrayApi)),
    }
}
