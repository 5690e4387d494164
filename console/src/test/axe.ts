// axe-core over a rendered page: the serious and critical violations, as "rule: target" lines for a readable diff.
import axe from "axe-core";

export async function seriousViolations(container: Element = document.body): Promise<string[]> {
  const results = await axe.run(container, { resultTypes: ["violations"], rules: { region: { enabled: false } } });
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(" ")}`));
}
