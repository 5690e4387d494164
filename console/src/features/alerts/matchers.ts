// Label matchers as Alertmanager reads them: =, !=, =~, !~ (regexes anchored); an absent label is "".

export type MatchOp = "=" | "!=" | "=~" | "!~";
export interface Matcher {
  name: string;
  op: MatchOp;
  value: string;
}

function regex(value: string): RegExp | null {
  try {
    return new RegExp(`^(?:${value})$`);
  } catch {
    return null;
  }
}

export function matcherMatches(matcher: Matcher, labels: Record<string, string>): boolean {
  const actual = labels[matcher.name] ?? "";
  switch (matcher.op) {
    case "=":
      return actual === matcher.value;
    case "!=":
      return actual !== matcher.value;
    case "=~":
      return regex(matcher.value)?.test(actual) ?? false;
    case "!~":
      return !(regex(matcher.value)?.test(actual) ?? true);
  }
}

/** Whether every matcher holds for these labels. */
export function allMatch(matchers: readonly Matcher[], labels: Record<string, string>): boolean {
  return matchers.every((m) => matcherMatches(m, labels));
}

export function matcherText(m: Matcher): string {
  return `${m.name}${m.op}"${m.value}"`;
}
