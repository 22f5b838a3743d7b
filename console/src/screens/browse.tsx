// Browse: a directory of a store (placeholder until the full view lands).

import type { ScreenProps } from "./registry.js";

export function BrowseScreen({ params }: ScreenProps) {
  return (
    <section>
      <h1>
        {params.store}/{params.path}
      </h1>
    </section>
  );
}
