#!/bin/sh
# gen-knobs.sh [--check] [SRCDIR] - write the knob table of docs/knobs.md from
# the plugin's one parameter table (the nv_params[] rows of src/param.c).
#
# The table sits in docs/knobs.md between the two "generated" marker lines;
# everything else in that file is written by hand. Without --check the block
# is rewritten in place; with --check nothing is written and the exit status
# is 1 (with a diff) when the file is stale. SRCDIR defaults to the top of the
# tree this script lives in. Needs only sh and perl (perl-base is essential on
# Debian).
set -eu

check=0
if [ "${1:-}" = "--check" ]; then
	check=1
	shift
fi
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
param=$top/src/param.c
doc=$top/docs/knobs.md
for f in "$param" "$doc"; do
	[ -r "$f" ] || { echo "gen-knobs.sh: cannot read $f" >&2; exit 2; }
done

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

perl -e '
use strict; use warnings;
my ($param, $doc) = @ARGV;
open(my $p, "<", $param) or die "$param: $!\n";
my $src = do { local $/; <$p> };
$src =~ /nv_params\[NV_PARAM_COUNT\]\s*=\s*\{(.*?)\n\};/s
	or die "gen-knobs.sh: no nv_params[] table in $param\n";
my $tbl = $1;
# Tokens of the table: string literals (adjacent ones are joined), other words.
my @rows;
while ($tbl =~ /\b(INT_ROW|STR_ROW)\s*\((.*?)\)\s*,\s*(?=\b(?:INT_ROW|STR_ROW)\b|\s*$)/sg) {
	my ($kind, $args) = ($1, $2);
	my @a;
	my $cur = "";
	my $instr = 0;
	my $ins = 0;	# a string literal was part of this argument
	for (my $i = 0; $i < length $args; $i++) {
		my $c = substr($args, $i, 1);
		if ($instr) {
			if ($c eq "\\") { $cur .= substr($args, ++$i, 1); next; }
			if ($c eq "\"") { $instr = 0; next; }
			$cur .= $c;
			next;
		}
		if ($c eq "\"") { $instr = 1; $ins = 1; next; }
		if ($c eq ",") { push @a, [$cur, $ins]; $cur = ""; $ins = 0; next; }
		next if $c =~ /\s/ && !$instr;
		$cur .= $c;
	}
	push @a, [$cur, $ins];
	push @rows, [$kind, @a];
}
die "gen-knobs.sh: no rows found in $param\n" unless @rows;
my %lim = (INT64_MAX => "2^63 - 1", INT32_MAX => "2^31 - 1", INT_MAX => "2^31 - 1");
sub num { my $v = shift; return $lim{$v} // $v; }
sub cell { my $v = shift; $v =~ s/\|/\\|/g; return $v; }
my @out = ("| knob | default | range | meaning |", "|---|---|---|---|");
for my $r (@rows) {
	my ($kind, @a) = @$r;
	my $env = $a[1][0];
	my ($def, $range, $help);
	if ($kind eq "INT_ROW") {
		$def = num($a[2][0]);
		$range = num($a[3][0]) . " .. " . num($a[4][0]);
		$help = $a[5][0];
	} else {
		$def = $a[2][1] ? $a[2][0] : "(unset)";
		$range = $a[3][0] eq "NULL" ? "text" : "checked text";
		$help = $a[4][0];
	}
	push @out, "| `$env` | " . cell($def) . " | $range | " . cell($help) . " |";
}
open(my $d, "<", $doc) or die "$doc: $!\n";
my @doc = <$d>;
my ($b, $e);
for my $i (0 .. $#doc) {
	$b = $i if $doc[$i] =~ /^<!-- BEGIN knob table/;
	$e = $i if $doc[$i] =~ /^<!-- END knob table/;
}
die "gen-knobs.sh: $doc lacks the BEGIN/END knob table markers\n"
	unless defined $b && defined $e && $b < $e;
print @doc[0 .. $b];
print "$_\n" for @out;
print @doc[$e .. $#doc];
' "$param" "$doc" >"$tmp"

if [ $check = 1 ]; then
	if ! cmp -s "$tmp" "$doc"; then
		echo "docs/knobs.md is stale: run scripts/gen-knobs.sh (the knob table in src/param.c changed)" >&2
		diff -u "$doc" "$tmp" >&2 || true
		exit 1
	fi
	exit 0
fi
cmp -s "$tmp" "$doc" || cat "$tmp" >"$doc"
