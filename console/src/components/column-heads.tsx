// A data table's header row: one column header per name, and, when the rows have buttons, a last
// column whose header is read out ("Actions") but not shown.

export function ColumnHeads(props: { columns: string[]; actions?: boolean }) {
  return (
    <thead>
      <tr>
        {props.columns.map((c) => (
          <th key={c} scope="col">
            {c}
          </th>
        ))}
        {props.actions && (
          <th scope="col">
            <span class="visually-hidden">Actions</span>
          </th>
        )}
      </tr>
    </thead>
  );
}
