import { ALL_GROUPS, FLAGS, GROUP_SCOPES, type Scopes } from "../scopes";

/** Three flags and four group pickers; "all groups" is the wildcard 0 and replaces any single group. */
export function ScopeEditor({
  value,
  onChange,
  groups,
}: {
  value: Scopes;
  onChange: (s: Scopes) => void;
  groups: { group_id: number; name: string }[];
}) {
  return (
    <div className="scopes">
      <fieldset>
        <legend>Account-wide</legend>
        {FLAGS.map((f) => (
          <label key={f.field} className="check">
            <input
              type="checkbox"
              checked={value.flags[f.field]}
              onChange={(e) => onChange({ ...value, flags: { ...value.flags, [f.field]: e.target.checked } })}
            />
            {f.label}
          </label>
        ))}
      </fieldset>
      {GROUP_SCOPES.map((g) => {
        const ids = value.groups[g.field];
        const all = ids.includes(ALL_GROUPS);
        const set = (next: number[]) => onChange({ ...value, groups: { ...value.groups, [g.field]: next } });
        return (
          <fieldset key={g.field}>
            <legend>{g.label[0].toUpperCase() + g.label.slice(1)} in</legend>
            <label className="check">
              <input
                type="checkbox"
                checked={all}
                onChange={(e) => set(e.target.checked ? [ALL_GROUPS] : [])}
              />
              all groups
            </label>
            {groups.map((gr) => (
              <label key={gr.group_id} className="check">
                <input
                  type="checkbox"
                  disabled={all}
                  checked={!all && ids.includes(gr.group_id)}
                  onChange={(e) =>
                    set(e.target.checked ? [...ids, gr.group_id] : ids.filter((x) => x !== gr.group_id))
                  }
                />
                {gr.name || "unnamed"} (#{gr.group_id})
              </label>
            ))}
          </fieldset>
        );
      })}
    </div>
  );
}
