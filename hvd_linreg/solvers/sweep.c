/* One sweep of coordinate descent on a quadratic (coordinate_descent.py's _sweep, in C): for
 * each coordinate j of coords, the soft-thresholded Newton step of its quadratic, and the
 * gradient's update by H's row j. The arithmetic is _sweep's, operation for operation (built
 * with -ffp-contract=off: no fused multiply-adds), so either gives the same bytes. */
#include <math.h>

double sweep(const double *H, long n, double *gradient, double *beta, const double *diag,
             const double *l1, const double *l2, const double *lower, const double *upper,
             const long *coords, long m, double at_threshold) {
    double biggest = 0.0;
    for (long k = 0; k < m; k++) {
        long j = coords[k];
        double h = diag[j], old = beta[j];
        double u = h * old - gradient[j];
        double shrunk = fabs(u) - l1[j];
        double updated = shrunk > at_threshold * l1[j] ? copysign(shrunk, u) / (h + l2[j]) : 0.0;
        if (updated < lower[j])
            updated = lower[j];
        if (updated > upper[j])
            updated = upper[j];
        if (updated != old) {
            double step = updated - old;
            const double *row = H + j * n;
            for (long i = 0; i < n; i++)
                gradient[i] += row[i] * step;
            beta[j] = updated;
            double moved = h * step * step;
            if (moved > biggest)
                biggest = moved;
        }
    }
    return biggest;
}
